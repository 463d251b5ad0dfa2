package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"slices"
	"strings"
)

// Separator joins a server's name and its tool's name: "<server>__<tool>".
const Separator = "__"

// mcpPrefix starts Claude Code's spelling of a server's tool, "mcp__<server>__<tool>".
const mcpPrefix = "mcp" + Separator

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

// ValidPrefix reports whether prefix holds only the characters [ExposedName] keeps
// (letters, digits, '_', '.' and '-'), so that the names made with it are prefix+tool.
func ValidPrefix(prefix string) bool {
	for _, r := range prefix {
		if !validNameRune(r) {
			return false
		}
	}
	return true
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
	return withHash(s, original)
}

// withHash is name, cut to leave room within MaxNameLen, ending in "_" and a hash of key:
// how the scheme keeps apart two names that would otherwise be the same.
func withHash(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	suffix := "_" + hex.EncodeToString(sum[:])[:8]
	return name[:min(len(name), MaxNameLen-len(suffix))] + suffix
}

// Qualified returns the spellings that name the tool called tool on server whatever other
// servers offer: "<server>__<tool>", "mcp__<server>__<tool>" and "<server>::<tool>".
// [SplitAlias] reads them back.
func Qualified(server, tool string) []string {
	return []string{server + Separator + tool, mcpPrefix + server + Separator + tool, server + "::" + tool}
}

// SplitAlias recognizes the qualified spellings of a tool name (see [Qualified]):
// "<server>::<tool>", "mcp__<server>__<tool>" and "<server>__<tool>", where server must be
// one of servers, in the last two spelled as configured or as [ExposedName] spells it
// ("My Server" is "My_Server", as Claude Code spells it too). The longest server that
// fits wins, so server names may themselves contain "__" (or "::"); tool is never empty.
func SplitAlias(name string, servers []string) (server, tool string, ok bool) {
	if server, tool, ok := cutServer(name, "::", servers, false); ok {
		return server, tool, true
	}
	// "mcp__<server>__<tool>" first, so that a server named "mcp" does not take the
	// prefix.
	if rest, found := strings.CutPrefix(name, mcpPrefix); found {
		if server, tool, ok := cutServer(rest, Separator, servers, true); ok {
			return server, tool, true
		}
	}
	return cutServer(name, Separator, servers, true)
}

// cutServer reads name as "<server><sep><tool>" with the longest of servers (or, when
// sanitized, its spelling in names) that leaves a tool.
func cutServer(name, sep string, servers []string, sanitized bool) (server, tool string, ok bool) {
	best, bestLen := "", 0
	for _, srv := range servers {
		spellings := []string{srv}
		if sanitized {
			spellings = append(spellings, sanitize(srv))
		}
		for _, spelled := range spellings {
			if len(spelled) > bestLen && len(name) > len(spelled)+len(sep) && strings.HasPrefix(name, spelled+sep) {
				best, bestLen = srv, len(spelled)
			}
		}
	}
	if best == "" {
		return "", "", false
	}
	return best, name[bestLen+len(sep):], true
}

// MatchTool reports whether any pattern matches the tool of a server. A pattern is a tool
// name or a glob ("get_*"), optionally qualified with its server as "server__tool",
// "mcp__server__tool" or "server::tool". A tool of no server (server "") is matched by
// its name alone. Allow-lists, block-lists ([Permit]) and the executor's quiet tools
// are all read with it.
func MatchTool(patterns []string, server, tool string) bool {
	_, ok := matching(patterns, server, tool)
	return ok
}

// matching is [MatchTool], returning the first pattern that matches as it was written.
func matching(patterns []string, server, tool string) (string, bool) {
	for _, written := range patterns {
		p := strings.TrimPrefix(written, mcpPrefix)
		if s, t, found := strings.Cut(p, "::"); found {
			p = s + Separator + t
		}
		if ok, _ := path.Match(p, tool); ok {
			return written, true
		}
		if server == "" {
			continue
		}
		if ok, _ := path.Match(p, server+Separator+tool); ok {
			return written, true
		}
	}
	return "", false
}

// ValidPattern reports whether p is a pattern [MatchTool] can read: a glob of [path.Match].
func ValidPattern(p string) bool {
	_, err := path.Match(p, "")
	return err == nil
}

// VendorNames maps each of names to the name the vendors' APIs accept for it (OpenAI and
// Anthropic: ^[a-zA-Z0-9_-]{1,64}$; Gemini's alphabet is wider): a valid name is its own,
// an invalid one has every other character replaced by '_' ("geometry.solve_circle_area"
// → "geometry_solve_circle_area") and is shortened to 64 with a hash; an alias that
// another name (or alias) already takes ends in a hash of the original. toolbus accepts
// the aliases back as the tools' names ([Unalias], [Options].VendorAliases).
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
			alias = withHash(alias, n)
		}
		out[n], taken[alias] = alias, true
	}
	return out
}

// Unalias returns the name of names that alias stands for, when alias is the name
// [VendorNames] gave it and not a name of its own.
func Unalias(alias string, names []string) (name string, ok bool) {
	name, ok = vendorAliases(names)[alias]
	return name, ok
}

// vendorAliases maps each alias of [VendorNames] that differs from its name back to the name.
func vendorAliases(names []string) map[string]string {
	out := map[string]string{}
	for original, alias := range VendorNames(names) {
		if alias != original {
			out[alias] = original
		}
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
