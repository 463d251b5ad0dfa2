package toolcall

import (
	"slices"
	"strings"
)

// The markers that start a block of calls, and how they are found in linear time.

// lit identifies a literal the extractor searches for: the markers that start a block,
// then the closers searched from outside a bounded block.
type lit uint8

const (
	// Markers, in priority order when two start at the same byte.
	litThink lit = iota
	litToolCall
	litToolCalls
	litFunctionCalls
	litFunctionEq
	litPythonTag
	litPythonStart
	litMistral
	litDeepSeek
	litDeepSeekCall
	litKimi
	litKimiCall
	litDSMLFunctionCalls
	litDSMLToolCalls
	litDSMLInvoke
	litFence
	litBrace
	litBracket
	numMarkers

	// Closers.
	litThinkEnd
	litToolCallEnd
	litToolCallsEnd
	litFunctionCallsEnd
	litPythonEnd
	litEomID
	litEotID
	litDeepSeekEnd
	litDeepSeekCallEnd
	litKimiEnd
	litKimiCallEnd
	litFunctionEnd
	litDSMLFunctionCallsEnd
	litDSMLToolCallsEnd
	numLits
)

var litText = [numLits]string{
	litThink:                "<think>",
	litToolCall:             "<tool_call>",
	litToolCalls:            "<tool_calls>",
	litFunctionCalls:        "<function_calls>",
	litFunctionEq:           "<function=",
	litPythonTag:            "<|python_tag|>",
	litPythonStart:          "<|python_start|>",
	litMistral:              "[TOOL_CALLS]",
	litDeepSeek:             "<｜tool▁calls▁begin｜>",
	litDeepSeekCall:         "<｜tool▁call▁begin｜>",
	litKimi:                 "<|tool_calls_section_begin|>",
	litKimiCall:             "<|tool_call_begin|>",
	litDSMLFunctionCalls:    "<｜DSML｜function_calls>",
	litDSMLToolCalls:        "<｜DSML｜tool_calls>",
	litDSMLInvoke:           "<｜DSML｜invoke",
	litFence:                "```",
	litBrace:                "{",
	litBracket:              "[",
	litThinkEnd:             "</think>",
	litToolCallEnd:          "</tool_call>",
	litToolCallsEnd:         "</tool_calls>",
	litFunctionCallsEnd:     "</function_calls>",
	litPythonEnd:            "<|python_end|>",
	litEomID:                "<|eom_id|>",
	litEotID:                "<|eot_id|>",
	litDeepSeekEnd:          "<｜tool▁calls▁end｜>",
	litDeepSeekCallEnd:      "<｜tool▁call▁end｜>",
	litKimiEnd:              "<|tool_calls_section_end|>",
	litKimiCallEnd:          "<|tool_call_end|>",
	litFunctionEnd:          "</function>",
	litDSMLFunctionCallsEnd: "</｜DSML｜function_calls>",
	litDSMLToolCallsEnd:     "</｜DSML｜tool_calls>",
}

// cursor caches where a literal next occurs, so that searching the text for it again
// and again from increasing offsets stays linear.
type cursor struct {
	from int    // where the last search started
	at   int    // what it found, -1 for nothing
	gen  uint64 // the run of the extractor it was for (extractor.gen); else unset
}

// The markers each format enables, in priority order; think and fences always count.
var (
	autoMarkers = []lit{litThink, litToolCall, litToolCalls, litFunctionCalls, litFunctionEq,
		litPythonTag, litPythonStart, litMistral, litDeepSeek, litDeepSeekCall, litKimi,
		litKimiCall, litDSMLFunctionCalls, litDSMLToolCalls, litDSMLInvoke, litFence}
	autoKnownMarkers = append(slices.Clip(autoMarkers), litBrace, litBracket)
	pinnedMarkers    = map[Format][]lit{
		FormatToolCallTag:   {litThink, litToolCall, litFence},
		FormatGLM:           {litThink, litToolCall, litFence},
		FormatQwen3Coder:    {litThink, litToolCall, litFunctionEq, litFence},
		FormatLlamaJSON:     {litThink, litPythonTag, litFence},
		FormatPythonic:      {litThink, litPythonStart, litFence},
		FormatMistral:       {litThink, litMistral, litFence},
		FormatDeepSeekV3:    {litThink, litDeepSeek, litDeepSeekCall, litFence},
		FormatDeepSeekV31:   {litThink, litDeepSeek, litDeepSeekCall, litFence},
		FormatKimiK2:        {litThink, litKimi, litKimiCall, litFence},
		FormatDeepSeekV32:   {litThink, litDSMLFunctionCalls, litDSMLToolCalls, litDSMLInvoke, litFence},
		FormatToolCallsTag:  {litThink, litToolCalls, litFence},
		FormatFunctionCalls: {litThink, litFunctionCalls, litFence},
		FormatJSON:          {litThink, litFence, litBrace, litBracket},
	}
)

// A markerSet is the markers a format enables, in priority order, and their groups.
type markerSet struct {
	markers []lit
	groups  []markerGroup
}

func newMarkerSet(markers []lit) *markerSet {
	set := &markerSet{markers: markers}
	for _, m := range markers {
		first := litText[m][0]
		i := slices.IndexFunc(set.groups, func(g markerGroup) bool { return g.first == first })
		if i < 0 {
			i = len(set.groups)
			set.groups = append(set.groups, markerGroup{first: first})
		}
		set.groups[i].markers[set.groups[i].n] = m
		set.groups[i].n++
	}
	return set
}

var (
	autoSet      = newMarkerSet(autoMarkers)
	autoKnownSet = newMarkerSet(autoKnownMarkers)
	pinnedSets   = func() map[Format]*markerSet {
		sets := make(map[Format]*markerSet, len(pinnedMarkers))
		for f, m := range pinnedMarkers {
			sets[f] = newMarkerSet(m)
		}
		return sets
	}()
)

func enabledMarkers(o *Options) *markerSet {
	if o.Format == FormatAuto {
		if len(o.KnownTools) > 0 {
			return autoKnownSet
		}
		return autoSet
	}
	if set, ok := pinnedSets[o.Format]; ok {
		return set
	}
	return autoSet
}

// A markerGroup finds the enabled markers that start with one byte, with one scan for
// that byte instead of one per marker.
type markerGroup struct {
	first   byte
	markers [16]lit
	n       int
	// the cached result of the last search
	from, at int
	found    lit
	done     bool
}

// next returns the first marker of the group at or after from in text, or -1.
func (g *markerGroup) next(text string, from int) (lit, int) {
	if g.done && from >= g.from && (g.at < 0 || g.at >= from) {
		return g.found, g.at
	}
	g.from, g.done, g.at = from, true, -1
	for i := from; i < len(text); i++ {
		j := strings.IndexByte(text[i:], g.first)
		if j < 0 {
			break
		}
		i += j
		for _, m := range g.markers[:g.n] {
			if strings.HasPrefix(text[i:], litText[m]) && (m != litBrace && m != litBracket || bareCandidate(text, i)) {
				g.found, g.at = m, i
				return m, i
			}
		}
	}
	return g.found, g.at
}

// find returns the first occurrence of l at or after from, or -1.
func (x *extractor) find(l lit, from int) int {
	c := &x.cur[l]
	if c.gen == x.gen && from >= c.from && (c.at < 0 || c.at >= from) {
		return c.at
	}
	c.from, c.gen = from, x.gen
	if from > len(x.text) {
		c.at = -1
		return -1
	}
	if i := strings.Index(x.text[from:], litText[l]); i >= 0 {
		c.at = from + i
	} else {
		c.at = -1
	}
	return c.at
}

// findBefore is find limited to occurrences that start before limit.
func (x *extractor) findBefore(l lit, from, limit int) int {
	if i := x.find(l, from); i >= 0 && i+len(litText[l]) <= limit {
		return i
	}
	return -1
}
