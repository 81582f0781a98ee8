"""interop.py: what the interop scripts share (numpy_interop.py, safetensors_interop.py): one
line per check ("ok    ..." or "FAIL  ..."), then a summary line, then the exit status."""
import sys


class Checks:
    def __init__(self, name, real):
        self.name, self.real, self.checks, self.failures = name, real, 0, 0

    def __call__(self, ok, what):
        self.checks += 1
        if not ok:
            self.failures += 1
        print(("ok    " if ok else "FAIL  ") + what)

    def finish(self):
        print(f"{self.name} ({self.real} build): {self.checks - self.failures} passed, "
              f"{self.failures} failed")
        sys.exit(1 if self.failures else 0)
