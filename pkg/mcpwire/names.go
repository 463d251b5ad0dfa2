package mcpwire

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"slices"
	"strings"
)

// Separator joins a server's name and its tool's name: "<server>__<tool>".
const Separator = "__"

// MaxNameLen is the longest name a model is shown; longer names are shortened.
const MaxNameLen = 64

// ExposedName is the name a model sees for the tool called tool on server: "<server>__<tool>",
// or prefix+tool when the server has a prefix. The result stays within [A-Za-z0-9_.-] and
// [MaxNameLen] characters: other characters become '_', and a longer name keeps its start
// and ends in a hash of the whole, so it is stable and still unique.
func ExposedName(server, prefix, tool string) string {
	name := server + Separator + tool
	if prefix != "" {
		name = prefix + tool
	}
	return shorten(sanitize(name), name)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if validNameRune(r) {
			return r
		}
		return '_'
	}, s)
}

func validNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-'
}

// shorten cuts s to MaxNameLen, ending it in a hash of original so that long names
// that share a beginning stay apart.
func shorten(s, original string) string {
	if len(s) <= MaxNameLen {
		return s
	}
	sum := sha256.Sum256([]byte(original))
	suffix := "_" + hex.EncodeToString(sum[:])[:8]
	return s[:MaxNameLen-len(suffix)] + suffix
}

// VendorNames maps each of names to the name the vendors' APIs accept for it (OpenAI and
// Anthropic: ^[a-zA-Z0-9_-]{1,64}$; Gemini's alphabet is wider): a valid name is its own,
// an invalid one has every other character replaced by '_' ("geometry.solve_circle_area"
// → "geometry_solve_circle_area") and is shortened to 64 with a hash; an alias that
// another name (or alias) already takes ends in a hash of the original. toolbus accepts
// the aliases back as the tools' names.
func VendorNames(names []string) map[string]string {
	out := make(map[string]string, len(names))
	taken := make(map[string]bool, len(names))
	for _, n := range names {
		if vendorValid(n) {
			out[n], taken[n] = n, true
		}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for _, n := range sorted {
		if _, ok := out[n]; ok {
			continue
		}
		alias := shorten(strings.Map(func(r rune) rune {
			if r < 128 && vendorRune(byte(r)) {
				return r
			}
			return '_'
		}, n), n)
		if alias == "" || taken[alias] {
			sum := sha256.Sum256([]byte(n))
			suffix := "_" + hex.EncodeToString(sum[:])[:8]
			alias = alias[:min(len(alias), MaxNameLen-len(suffix))] + suffix
		}
		out[n], taken[alias] = alias, true
	}
	return out
}

func vendorValid(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !vendorRune(name[i]) {
			return false
		}
	}
	return true
}

func vendorRune(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// SplitAlias recognizes the qualified spellings of a tool name: "mcp__<server>__<tool>",
// "<server>::<tool>" and "<server>__<tool>", where server must be one of servers (the
// longest that fits wins, so server names may themselves contain "__").
func SplitAlias(name string, servers []string) (server, tool string, ok bool) {
	if s, t, found := strings.Cut(name, "::"); found {
		for _, srv := range servers {
			if srv == s {
				return s, t, true
			}
		}
		return "", "", false
	}
	// "mcp__<server>__<tool>" first, so that a server named "mcp" does not take the
	// prefix; a server's name as configured or as toolbus exposes it ("My Server" is
	// "My_Server" in names, as Claude Code spells them too).
	candidates := []string{name}
	if rest, ok := strings.CutPrefix(name, "mcp"+Separator); ok {
		candidates = []string{rest, name}
	}
	for _, n := range candidates {
		best, bestLen := "", 0
		for _, srv := range servers {
			for _, spelled := range []string{srv, sanitize(srv)} {
				if len(spelled) > bestLen && strings.HasPrefix(n, spelled+Separator) && len(n) > len(spelled)+len(Separator) {
					best, bestLen = srv, len(spelled)
				}
			}
		}
		if best != "" {
			return best, n[bestLen+len(Separator):], true
		}
	}
	return "", "", false
}

// MatchTool reports whether any pattern matches the tool of a server. A pattern is a tool
// name or a glob ("get_*"), optionally qualified with its server as "server__tool",
// "mcp__server__tool" or "server::tool". Allow-lists, block-lists and the executor's
// quiet tools are all read with it.
func MatchTool(patterns []string, server, tool string) bool {
	for _, p := range patterns {
		p = strings.TrimPrefix(p, "mcp"+Separator)
		if s, t, found := strings.Cut(p, "::"); found {
			p = s + Separator + t
		}
		for _, candidate := range []string{tool, server + Separator + tool} {
			if ok, _ := path.Match(p, candidate); ok {
				return true
			}
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
