package gcs

import (
	"unicode"
	"unicode/utf8"
)

// ValidLabelKey reports whether s is a valid GCS label key: 1 to 63
// characters, lowercase letters (any script), digits, '_' and '-', starting
// with a letter. Checked rune by rune: the equivalent regular expression
// over Unicode classes costs megabytes of memory once compiled.
func ValidLabelKey(s string) bool {
	if s == "" || utf8.RuneCountInString(s) > 63 {
		return false
	}
	first, _ := utf8.DecodeRuneInString(s)
	return isLabelLetter(first) && validLabelRunes(s)
}

// ValidLabelValue reports whether s is a valid GCS label value: up to 63
// characters of lowercase letters (any script), digits, '_' and '-'.
func ValidLabelValue(s string) bool {
	return utf8.RuneCountInString(s) <= 63 && validLabelRunes(s)
}

func validLabelRunes(s string) bool {
	for _, r := range s {
		if !isLabelLetter(r) && !unicode.IsNumber(r) && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// isLabelLetter: a lowercase letter, or a letter of a script without case.
func isLabelLetter(r rune) bool {
	return unicode.Is(unicode.Ll, r) || unicode.Is(unicode.Lo, r)
}
