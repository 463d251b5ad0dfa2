package toolcall

// Functionary v3.2: each message part opens with >>> and a recipient on its own line,
// >>>get_weather\n{"city": "Paris"} for a call and >>>all\n for text to the user.
// Functionary v3.1 (<function=NAME>{…}</function>) is read with Qwen3-Coder's tag in
// tags.go.

// functionaryV32 reads the part that >>> opens at text[at]. Text that does not look like
// one (">>> print(x)", a Python prompt) is content.
func (x *extractor) functionaryV32(at, limit int) (int, bool) {
	s := x.text[:limit]
	i := at + len(litText[litFunctionary])
	ns := i
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
