package toolcall

import "strings"

// Reasoning: the text a model thinks in, whose calls never run. Each family marks it its
// own way (<think>, <seed:think>, [THINK], <|START_THINKING|>, ◁think▷, Gemma 4's
// <|channel>thought…<channel|>; Harmony's
// analysis channel is read in harmony.go). Kimi-K2-Thinking is the exception: it writes
// its calls inside its reasoning, before </think>, and llama.cpp runs them; so does
// toolbus, for Kimi's call sections only (their tokens are special: a model does not
// quote them by accident).

// think reads the reasoning that marker m opens at text[at].
func (x *extractor) think(m lit, at, limit int) int {
	start := at + len(litText[m])
	if m == litGemmaThink {
		// Gemma 4's <|channel>thought\n…<channel|>: the channel's name is no reasoning.
		if rest, ok := strings.CutPrefix(x.text[start:limit], "thought"); ok {
			start = limit - len(strings.TrimLeft(rest, " \n"))
		}
	}
	end := x.findBefore(thinkEnd(m), start, limit)
	if end < 0 {
		x.reasoning(start, limit)
		return limit
	}
	x.reasoning(start, end)
	end += len(litText[thinkEnd(m)])
	if m == litGemmaThink && strings.HasPrefix(x.text[end:limit], "call:") {
		// Gemma 4 may drop <|tool_call> right after its thought (vLLM reads it).
		end, _ = x.gemmaCall(litGemma4, end, end, limit)
	}
	return end
}

// reasoning keeps text[from:to] as reasoning, except Kimi K2's call sections in it, which
// are calls where Kimi's markers are enabled.
func (x *extractor) reasoning(from, to int) {
	for from < to && x.kimiEnabled() {
		m, at := litKimi, x.findBefore(litKimi, from, to)
		if c := x.findBefore(litKimiCall, from, to); c >= 0 && (at < 0 || c < at) {
			m, at = litKimiCall, c
		}
		if at < 0 {
			break
		}
		x.addReason(from, at)
		end, _ := x.kimi(m, at, to)
		from = min(max(end, at+1), to)
	}
	x.addReason(from, to)
}

func (x *extractor) addReason(from, to int) {
	if from < to {
		x.reason = append(x.reason, span{from, to})
	}
}

func (x *extractor) kimiEnabled() bool {
	return x.o.Format == FormatAuto || x.o.Format == FormatKimiK2
}

// ownReasoning reports whether s opens reasoning itself (<think>), or shows the
// reasoning syntax of a model whose template never opens <think> in the prompt.
func ownReasoning(s string) bool {
	if strings.Contains(s, litText[litThink]) {
		return true
	}
	if strings.IndexByte(s, '<') < 0 && strings.IndexByte(s, '[') < 0 && !strings.Contains(s, litText[litKimiThink]) {
		return false
	}
	for _, l := range [...]lit{litSeedThink, litMistralThink, litCohereThink, litKimiThink, litGemmaThink, litHarmonyChannel} {
		if strings.Contains(s, litText[l]) {
			return true
		}
	}
	return false
}
