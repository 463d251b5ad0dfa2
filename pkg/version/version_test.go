package version_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Dockerfile stamps every binary with its VERSION through the -X flag it names: a
// binary built with that very flag and no commit recorded (as in an image's build,
// -buildvcs=false) reports the stamp, in --version and as its short version.
func TestDockerfileStampsTheVersion(t *testing.T) {
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-X (\S+)=\$\{VERSION\}`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatal("the Dockerfile stamps no version (-X …=${VERSION})")
	}
	bin := filepath.Join(t.TempDir(), "engineering")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X "+string(m[1])+"=v9.8.7-test", "-o", bin, "../../cmd/engineering")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "engineering v9.8.7-test ") {
		t.Errorf("--version printed %q, want the stamp", out)
	}
}
