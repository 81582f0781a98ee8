#!/bin/sh
# python_module.sh: whether Debian's python3 (/usr/bin/python3) imports a module, for the
# comparison scripts that skip without it (tests/io/test_numpy.sh, tests/nn/test_torch.sh,
# tests/support/torch_run.sh). Exit 0 when it does; else prints the reason a skip line gives,
# naming the package to install, and exits 1.
# Usage: tests/support/python_module.sh MODULE DEBIAN_PACKAGE
set -u
if [ ! -x /usr/bin/python3 ]; then
    echo "python3 is not installed; apt-get install $2 to run it"
    exit 1
fi
if ! /usr/bin/python3 -c "import $1" 2>/dev/null; then
    echo "$2 is not installed for /usr/bin/python3; apt-get install $2 to run it"
    exit 1
fi
