package mcpwire

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
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
	for _, n := range []string{name, strings.TrimPrefix(name, "mcp"+Separator)} {
		best := ""
		for _, srv := range servers {
			if len(srv) > len(best) && strings.HasPrefix(n, srv+Separator) && len(n) > len(srv)+len(Separator) {
				best = srv
			}
		}
		if best != "" {
			return best, n[len(best)+len(Separator):], true
		}
	}
	return "", "", false
}

// matchTool reports whether any pattern matches the tool. A pattern is a tool name or a
// glob ("get_*"), optionally qualified with its server as "server__tool",
// "mcp__server__tool" or "server::tool".
func matchTool(patterns []string, server, tool string) bool {
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
