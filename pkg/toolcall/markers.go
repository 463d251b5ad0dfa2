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
	litSeedThink
	litMistralThink
	litCohereThink
	litKimiThink
	litGemmaThink
	litHarmonyStart
	litHarmonyChannel
	litGemma4
	litFunctionGemma
	litMiniMax
	litSeedToolCall
	litStep3
	litStep3Call
	litApertus
	litCohere
	litCohereResponse
	litCohereResponseEnd
	litFunctionary
	litLFM2
	litLongCat
	litRoleSep
	litGigaChatCall
	litNemotron
	litGranite
	litPhi4
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
	litSeedThinkEnd
	litMistralThinkEnd
	litCohereThinkEnd
	litKimiThinkEnd
	litGemmaThinkEnd
	litGemmaTurnEnd
	litHarmonyMessage
	litHarmonyEnd
	litHarmonyCall
	litHarmonyReturn
	litGemma4End
	litFunctionGemmaEnd
	litMiniMaxEnd
	litSeedToolCallEnd
	litStep3End
	litStep3CallEnd
	litApertusEnd
	litCohereEnd
	litLongCatEnd
	litNemotronEnd
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
	litSeedThink:            "<seed:think>",
	litMistralThink:         "[THINK]",
	litCohereThink:          "<|START_THINKING|>",
	litKimiThink:            "◁think▷",
	litGemmaThink:           "<|channel>",
	litHarmonyStart:         "<|start|>",
	litHarmonyChannel:       "<|channel|>",
	litGemma4:               "<|tool_call>",
	litFunctionGemma:        "<start_function_call>",
	litMiniMax:              "<minimax:tool_call>",
	litSeedToolCall:         "<seed:tool_call>",
	litStep3:                "<｜tool_calls_begin｜>",
	litStep3Call:            "<｜tool_call_begin｜>",
	litApertus:              "<|tools_prefix|>",
	litCohere:               "<|START_ACTION|>",
	litCohereResponse:       "<|START_RESPONSE|>",
	litCohereResponseEnd:    "<|END_RESPONSE|>",
	litFunctionary:          ">>>",
	litLFM2:                 "<|tool_call_start|>",
	litLongCat:              "<longcat_tool_call>",
	litRoleSep:              "<|role_sep|>",
	litGigaChatCall:         "<|function_call|>",
	litNemotron:             "<TOOLCALL>",
	litGranite:              "<|tool_call|>",
	litPhi4:                 "functools[",
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
	litSeedThinkEnd:         "</seed:think>",
	litMistralThinkEnd:      "[/THINK]",
	litCohereThinkEnd:       "<|END_THINKING|>",
	litKimiThinkEnd:         "◁/think▷",
	litGemmaThinkEnd:        "<channel|>",
	litGemmaTurnEnd:         "<turn|>",
	litHarmonyMessage:       "<|message|>",
	litHarmonyEnd:           "<|end|>",
	litHarmonyCall:          "<|call|>",
	litHarmonyReturn:        "<|return|>",
	litGemma4End:            "<tool_call|>",
	litFunctionGemmaEnd:     "<end_function_call>",
	litMiniMaxEnd:           "</minimax:tool_call>",
	litSeedToolCallEnd:      "</seed:tool_call>",
	litStep3End:             "<｜tool_calls_end｜>",
	litStep3CallEnd:         "<｜tool_call_end｜>",
	litApertusEnd:           "<|tools_suffix|>",
	litCohereEnd:            "<|END_ACTION|>",
	litLongCatEnd:           "</longcat_tool_call>",
	litNemotronEnd:          "</TOOLCALL>",
}

// reasoningMarkers open reasoning in every format; thinkEnd gives each one's closer.
var reasoningMarkers = []lit{litThink, litSeedThink, litMistralThink, litCohereThink, litKimiThink, litGemmaThink}

func thinkEnd(m lit) lit {
	switch m {
	case litSeedThink:
		return litSeedThinkEnd
	case litMistralThink:
		return litMistralThinkEnd
	case litCohereThink:
		return litCohereThinkEnd
	case litKimiThink:
		return litKimiThinkEnd
	case litGemmaThink:
		return litGemmaThinkEnd
	}
	return litThinkEnd
}

// cursor caches where a literal next occurs, so that searching the text for it again
// and again from increasing offsets stays linear.
type cursor struct {
	from int    // where the last search started
	at   int    // what it found, -1 for nothing
	gen  uint64 // the run of the extractor it was for (extractor.gen); else unset
}

// The markers each format enables, in priority order; reasoning and fences always count.
var (
	autoMarkers = []lit{litThink, litSeedThink, litMistralThink, litCohereThink, litKimiThink, litGemmaThink,
		litToolCall, litToolCalls, litFunctionCalls, litFunctionEq,
		litPythonTag, litPythonStart, litMistral, litDeepSeek, litDeepSeekCall, litKimi,
		litKimiCall, litDSMLFunctionCalls, litDSMLToolCalls, litDSMLInvoke,
		litHarmonyStart, litHarmonyChannel, litGemma4, litFunctionGemma, litMiniMax,
		litSeedToolCall, litStep3, litStep3Call, litApertus, litCohere, litCohereResponse,
		litCohereResponseEnd,
		litLFM2, litLongCat, litRoleSep, litGigaChatCall, litNemotron, litGranite, litPhi4,
		litFence}
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
		// Qwen3-Coder's bare <function=…> serves Functionary v3.1.
		FormatFunctionaryV31: {litThink, litFunctionEq, litFence},
		FormatHarmony:        {litThink, litHarmonyStart, litHarmonyChannel, litFence},
		FormatGemma4:         {litThink, litGemma4, litFence},
		FormatFunctionGemma:  {litThink, litFunctionGemma, litFence},
		FormatToolCode:       {litThink, litFence},
		FormatMiniMax:        {litThink, litMiniMax, litFence},
		FormatSeedOSS:        {litThink, litSeedToolCall, litFence},
		FormatStep3:          {litThink, litStep3, litStep3Call, litFence},
		FormatApertus:        {litThink, litApertus, litFence},
		FormatCohere:         {litThink, litCohere, litCohereResponse, litCohereResponseEnd, litFence},
		FormatFunctionaryV32: {litThink, litFunctionary, litFence},
		FormatLFM2:           {litThink, litLFM2, litFence},
		FormatLongCat:        {litThink, litLongCat, litFence},
		FormatGigaChat:       {litThink, litRoleSep, litGigaChatCall, litFence},
		FormatNemotron:       {litThink, litNemotron, litFence},
		FormatGranite:        {litThink, litGranite, litFence},
		FormatPhi4Mini:       {litThink, litPhi4, litFence},
	}
)

// A markerSet is the markers a format enables, in priority order, and their groups.
type markerSet struct {
	markers []lit
	groups  []markerGroup // without a search cached: copied into each extractor
}

func newMarkerSet(markers []lit) *markerSet {
	if markers[0] == litThink && !slices.Contains(markers, litSeedThink) {
		markers = append(slices.Clone(reasoningMarkers), markers[1:]...)
	}
	set := &markerSet{markers: markers}
	for _, m := range markers {
		t := litText[m]
		key := t[0]
		if lookBack(m) {
			key = t[len(t)-1]
		}
		i := slices.IndexFunc(set.groups, func(g markerGroup) bool { return g.first == key })
		if i < 0 {
			i = len(set.groups)
			set.groups = append(set.groups, markerGroup{groupSpec: &groupSpec{first: key}})
		}
		g := set.groups[i].groupSpec
		switch {
		case lookBack(m):
			g.back, g.hasBack = m, true
		case len(t) == 1:
			g.shorts[g.nShort] = m // a one-byte marker: any byte may follow
			g.nShort++
		default:
			g.markers[g.n] = m
			g.n++
		}
	}
	for _, g := range set.groups {
		g.index()
	}
	return set
}

// index orders the group's markers by their second byte, in priority order within one
// byte, so that a key byte is tried against the markers its next byte may begin only.
func (g *groupSpec) index() {
	byte2 := func(m lit) byte { return litText[m][1] }
	slices.SortStableFunc(g.markers[:g.n], func(a, b lit) int { return int(byte2(a)) - int(byte2(b)) })
	for k, m := range g.markers[:g.n] {
		c := byte2(m)
		if g.count[c] == 0 {
			g.start[c] = uint8(k)
		}
		g.count[c]++
	}
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

// lookBack reports whether marker m is found by its last byte, looking back, rather than
// by its first: the f of functools[ is everywhere in prose, its [ is not, and a scan for
// [ is made anyway (Mistral's [TOOL_CALLS]).
func lookBack(m lit) bool { return m == litPhi4 }

// A markerGroup finds the enabled markers that start with one byte, with one scan for
// that byte instead of one per marker; and the marker that ends with it (back), if any.
type markerGroup struct {
	*groupSpec
	// the cached result of the last search
	from, at int
	found    lit
	done     bool
}

// A groupSpec is what a markerGroup looks for, shared by every extractor.
type groupSpec struct {
	first byte
	// markers, ordered by their second byte: start[c] and count[c] give those whose
	// second byte is c, so that a key byte followed by another (an HTML tag's <p)
	// costs one test.
	markers      [40]lit
	n            int
	start, count [256]uint8
	// shorts are the markers that are the key byte alone, tried last.
	shorts  [2]lit
	nShort  int
	back    lit
	hasBack bool
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
		// A marker ending at i starts before any starting at i; it holds no byte of the
		// group, so none starts within it.
		if b := i + 1 - len(litText[g.back]); g.hasBack && b >= from && strings.HasPrefix(text[b:], litText[g.back]) {
			g.found, g.at = g.back, b
			return g.back, b
		}
		if i+1 < len(text) {
			c := text[i+1]
			for _, m := range g.markers[g.start[c] : g.start[c]+g.count[c]] {
				if strings.HasPrefix(text[i:], litText[m]) {
					g.found, g.at = m, i
					return m, i
				}
			}
		}
		for _, m := range g.shorts[:g.nShort] {
			if m != litBrace && m != litBracket || bareCandidate(text, i) {
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
