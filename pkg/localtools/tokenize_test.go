package localtools

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func tokens(text string) []string {
	var out []string
	tokenize(text, func(t string, _, _ int) { out = append(out, t) })
	return out
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{name: "empty", text: "", want: nil},
		{name: "english", text: "Pipe-sizing: don't PANIC!", want: []string{"pipe", "sizing", "don", "t", "panic"}},
		{name: "german umlauts and sharp s", text: "Größe der Straße", want: []string{"grösse", "der", "strasse"}},
		{name: "german upper case folds to the same term", text: "GRÖSSE", want: []string{"grösse"}},
		{name: "cyrillic", text: "Москва — столица России.", want: []string{"москва", "столица", "россии"}},
		{name: "greek final sigma", text: "ΟΔΟΣ οδος", want: []string{"οδοσ", "οδοσ"}},
		{name: "combining diaeresis stays in the word", text: "nai\u0308ve", want: []string{"nai\u0308ve"}},
		{name: "devanagari vowel signs", text: "हिन्दी भाषा", want: []string{"हिन्दी", "भाषा"}},
		{name: "japanese as bigrams across han and kana", text: "東京都に住む", want: []string{"東京", "京都", "都に", "に住", "住む"}},
		{name: "cjk then latin", text: "日本語abc123", want: []string{"日本", "本語", "abc123"}},
		{name: "korean", text: "한국어 공부", want: []string{"한국", "국어", "공부"}},
		{name: "lone han character", text: "山 x", want: []string{"山", "x"}},
		{name: "katakana prolonged sound mark", text: "コーヒー", want: []string{"コー", "ーヒ", "ヒー"}},
		{name: "long word is cut", text: "a" + strings.Repeat("b", 100), want: []string{"a" + strings.Repeat("b", maxTermRunes-1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tokens(tt.text); !slices.Equal(got, tt.want) {
				t.Errorf("tokenize(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestTokenizeSpans(t *testing.T) {
	text := "Die Größe: 東京"
	var spans []string
	tokenize(text, func(_ string, s, e int) { spans = append(spans, text[s:e]) })
	if want := []string{"Die", "Größe", "東京"}; !slices.Equal(spans, want) {
		t.Errorf("spans = %q, want %q", spans, want)
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "Größe der Straße", "東京都に住む", "Москва", "nai\u0308ve", "\u0301x", "a\xffb", "コーヒー 한국어"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		last := -1
		tokenize(text, func(term string, s, e int) {
			if term == "" {
				t.Fatalf("empty term in %q", text)
			}
			if s < 0 || e > len(text) || s >= e || s < last {
				t.Fatalf("bad span [%d,%d) after %d in %q", s, e, last, text)
			}
			last = s
			if utf8.ValidString(text) && !utf8.ValidString(term) {
				t.Fatalf("invalid UTF-8 term %q from %q", term, text)
			}
			if utf8.RuneCountInString(term) > 4*maxTermRunes {
				t.Fatalf("term of %d runes", utf8.RuneCountInString(term))
			}
		})
	})
}
