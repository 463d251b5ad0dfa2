// Command word_count is a tools-folder tool written in Go: it reads {"text": "..."} on
// stdin and prints the counts as JSON. Build it into the tools folder:
//
//	go build -o examples/local-tools/tools/ ./examples/local-tools/word_count
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

func main() {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		// stderr's last lines become the error message the model sees.
		fmt.Fprintln(os.Stderr, "word_count: cannot read the arguments:", err)
		os.Exit(1)
	}
	lines := strings.Count(in.Text, "\n")
	if in.Text != "" && !strings.HasSuffix(in.Text, "\n") {
		lines++
	}
	json.NewEncoder(os.Stdout).Encode(map[string]int{
		"words":      len(strings.Fields(in.Text)),
		"lines":      lines,
		"characters": utf8.RuneCountInString(in.Text),
	})
}
