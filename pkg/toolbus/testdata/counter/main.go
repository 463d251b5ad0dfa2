// Command counter is a tools-folder tool for fault tests: it records each invocation by
// appending the call's "id" argument to $COUNT_FILE, after a pause of 1–50 ms, so a test
// can count how often each call really ran.
package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

func main() {
	var args struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	time.Sleep(time.Duration(1+rand.IntN(50)) * time.Millisecond)
	f, err := os.OpenFile(os.Getenv("COUNT_FILE"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := f.WriteString(args.ID + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f.Close()
	fmt.Printf("{\"recorded\": %q}\n", args.ID)
}
