/* hf_internal.h: the Unicode tables of hf_unicode.c (generated), shared with hf_tokenizer.c.
 * Read next: hf_tokenizer.c. */
#ifndef ATTOGRAD_HF_INTERNAL_H
#define ATTOGRAD_HF_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
extern const uint32_t txt_hf_letter[][2], txt_hf_number[][2], txt_hf_space[][2],
    txt_hf_nfc_unsafe[][2];
extern const int txt_hf_letter_n, txt_hf_number_n, txt_hf_space_n, txt_hf_nfc_unsafe_n;
/* GPT-2's byte-level alphabet: the character that stands for byte b (bytes_to_unicode) */
uint32_t txt_hf_byte_char_(int b);
/* GPT-2's split pattern over code points: the length of the chunk at p[0..n), valid UTF-8 */
size_t txt_hf_gpt2_chunk_(const uint8_t *p, size_t n);
/* attograd's TXT_SPLIT_GPT2 as a regex of the tokenizers library (hf_write.c) */
extern const char txt_hf_attograd_split_[];
#endif
