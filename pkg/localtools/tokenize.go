package localtools

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTermRunes bounds a term; longer words are cut, so that a base64 blob in a
// document does not make a huge term.
const maxTermRunes = 64

// tokenize calls emit with each search term of text and its byte span, in order.
//
// It is Unicode-aware and language-neutral, without stemming or stop words:
//   - A word is a run of letters, digits and combining marks (so "Größe", "Москва",
//     "naïve" written with a combining diaeresis, and Devanagari vowel signs stay
//     whole); everything else separates words.
//   - Words are lower-cased with Unicode rules; "ß" folds to "ss" (so "GRÖSSE" and
//     "Größe" match) and the Greek final sigma to σ.
//   - Han, Hiragana, Katakana and Hangul are not written with spaces between words, so
//     a run of them is indexed as overlapping character bigrams ("東京都" → "東京",
//     "京都"), and a lone character as itself. A query is tokenised the same way, so a
//     two-character word matches wherever it occurs.
//
// Text is not Unicode-normalised: a document stored in NFD does not match an NFC query.
// Scripts without spaces other than CJK (Thai, Lao, Khmer, Myanmar) yield whole runs.
func tokenize(text string, emit func(term string, start, end int)) {
	const (
		none = iota
		word
		cjk
	)
	kind, start := none, 0
	var cjkRunes []int // byte offsets of the runes of the current CJK run
	flush := func(end int) {
		switch kind {
		case word:
			emit(normalizeWord(text[start:end]), start, end)
		case cjk:
			cjkRunes = append(cjkRunes, end)
			if len(cjkRunes) == 2 {
				emit(text[cjkRunes[0]:cjkRunes[1]], cjkRunes[0], cjkRunes[1])
			}
			for i := 0; i+2 < len(cjkRunes); i++ {
				emit(text[cjkRunes[i]:cjkRunes[i+2]], cjkRunes[i], cjkRunes[i+2])
			}
			cjkRunes = cjkRunes[:0]
		}
		kind = none
	}
	for i, r := range text {
		switch {
		case isCJK(r):
			if kind != cjk {
				flush(i)
				kind, start = cjk, i
			}
			cjkRunes = append(cjkRunes, i)
		case unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me):
			// A combining mark belongs to the rune before it; in a CJK run it widens
			// that rune's span.
			if kind == none {
				kind, start = word, i
			}
		case unicode.IsLetter(r) || unicode.IsNumber(r):
			if kind != word {
				flush(i)
				kind, start = word, i
			}
		default:
			flush(i)
		}
	}
	flush(len(text))
}

// isCJK reports whether r belongs to a script written without spaces between words
// that is indexed as bigrams.
func isCJK(r rune) bool {
	if r < 0x1100 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		r == 0x30FC // ー, the prolonged sound mark, is in the Common script
}

var wordFolder = strings.NewReplacer("ß", "ss", "ς", "σ")

func normalizeWord(w string) string {
	w = wordFolder.Replace(strings.ToLower(w))
	if utf8.RuneCountInString(w) > maxTermRunes {
		n := 0
		for i := range w {
			if n == maxTermRunes {
				return w[:i]
			}
			n++
		}
	}
	return w
}

// terms returns the distinct terms of a query, in order of first appearance.
func terms(query string) []string {
	var out []string
	seen := map[string]bool{}
	tokenize(query, func(t string, _, _ int) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	})
	return out
}
