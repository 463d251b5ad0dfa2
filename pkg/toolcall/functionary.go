package toolcall

// Functionary v3.2: each message part opens with >>> and a recipient on its own line,
// >>>get_weather\n{"city": "Paris"} for a call and >>>all\n for text to the user.
// Functionary v3.1 (<function=NAME>{…}</function>) is read with Qwen3-Coder's tag in
// tags.go.

// functionaryV32 reads the part that >>> opens at text[at]. Text that does not look like
// one (">>> print(x)", a Python prompt) is content.
func (x *extractor) functionaryV32(at, limit int) (int, bool) {
	return x.functionaryPart(at, at+len(litText[litFunctionary]), limit)
}

// functionaryStart reads the part a response begins with at text[at]: the template
// ends the prompt with >>>, so the model's first recipient comes without it —
// get_weather\n{…} or all\n (llama.cpp's functionary v3.2 parser reads a name followed
// by a line break and '{', or all, at the start). It returns where the part ends, or
// at when the text does not begin so.
func (x *extractor) functionaryStart(at int) int {
	s := x.text
	i := at
	for i < len(s) && (isWordByte(s[i]) || s[i] == '-' || s[i] == '.') {
		i++
	}
	if i == at || i >= len(s) || s[i] != '\n' {
		return at
	}
	if s[at:i] != "all" && (i+1 >= len(s) || s[i+1] != '{') {
		return at
	}
	end, ok := x.functionaryPart(at, at, len(s))
	if !ok {
		return at
	}
	return end
}

// functionaryPart reads the part whose recipient's name starts at text[ns] (after >>>
// at text[at], or at the start).
func (x *extractor) functionaryPart(at, ns, limit int) (int, bool) {
	s := x.text[:limit]
	i := ns
	for i < limit && (isWordByte(s[i]) || s[i] == '-' || s[i] == '.') {
		i++
	}
	name := s[ns:i]
	if name == "" || i >= limit || s[i] != '\n' {
		return ns, false
	}
	body := i + 1
	if name == "all" {
		end := limit
		if j := x.findBefore(litFunctionary, body, limit); j >= 0 {
			end = j
		}
		x.addContent(body, end)
		return end, true
	}
	j, _ := trimSpan(s, body, limit)
	if j < limit && s[j] != '{' {
		return ns, false
	}
	b := blk{format: FormatFunctionaryV32, start: at, end: limit}
	if j >= limit {
		x.add(b, parsed{name: name})
		return limit, true
	}
	stop := limit
	if k := x.findBefore(litFunctionary, j, limit); k >= 0 {
		stop = k
	}
	p, end := x.argsAt(j, stop)
	if p.err != "" {
		end = stop
	}
	p.name = name
	b.end = end
	x.add(b, p)
	return end, true
}
