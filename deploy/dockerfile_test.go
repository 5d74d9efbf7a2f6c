package deploy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// What the image promises.
const (
	dockerfilePath   = "../Dockerfile"
	dockerignorePath = "../.dockerignore"
	builderImage     = "golang:1.26"
	runtimeImage     = "gcr.io/distroless/static-debian12:nonroot"
	mainPackage      = "./cmd/coordinatord"
)

// image is what the checks learn from a parsed Dockerfile.
type image struct {
	stages     []instructions.Stage
	entrypoint []string // exec form of the final stage's ENTRYPOINT
}

// parseDockerfile parses text with BuildKit's parser and returns its stages, with every
// warning of BuildKit's Dockerfile linter (the checks of `docker build --check`) as an error.
func parseDockerfile(text string) (*image, error) {
	ast, err := parser.Parse(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse Dockerfile: %w", err)
	}
	var lint []error
	for _, w := range ast.Warnings {
		lint = append(lint, fmt.Errorf("line %d: %s", w.Location.Start.Line, w.Short))
	}
	l := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		lint = append(lint, fmt.Errorf("line %d: %s: %s", line, rule, msg))
	}})
	stages, _, err := instructions.Parse(ast.AST, l)
	if err != nil {
		return nil, fmt.Errorf("Dockerfile instructions: %w", err)
	}
	if len(lint) > 0 {
		return nil, fmt.Errorf("Dockerfile lint: %w", errors.Join(lint...))
	}
	img := &image{stages: stages}
	if len(stages) == 0 {
		return nil, errors.New("Dockerfile has no stage")
	}
	for _, cmd := range stages[len(stages)-1].Commands {
		if ep, ok := cmd.(*instructions.EntrypointCommand); ok {
			if ep.PrependShell {
				return nil, errors.New("ENTRYPOINT must use the exec (JSON) form, so that signals reach the process")
			}
			img.entrypoint = ep.CmdLine
		}
	}
	return img, nil
}

// dockerfileProblems lists how img breaks the image's promises.
func dockerfileProblems(img *image) []error {
	var problems []error
	if len(img.stages) < 2 {
		return []error{fmt.Errorf("%d stages, want a build stage and a runtime stage", len(img.stages))}
	}
	build, final := img.stages[0], img.stages[len(img.stages)-1]
	if build.BaseName != builderImage {
		problems = append(problems, fmt.Errorf("build stage FROM %s, want %s", build.BaseName, builderImage))
	}
	if final.BaseName != runtimeImage {
		problems = append(problems, fmt.Errorf("final stage FROM %s, want %s", final.BaseName, runtimeImage))
	}
	binary := ""
	for _, cmd := range build.Commands {
		run, ok := cmd.(*instructions.RunCommand)
		if !ok {
			continue
		}
		line := strings.Join(run.CmdLine, " ")
		if !strings.Contains(line, "go build") {
			continue
		}
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w `, "-X main.buildVersion=${VERSION}", mainPackage} {
			if !strings.Contains(line, want) {
				problems = append(problems, fmt.Errorf("go build line lacks %s: %s", want, line))
			}
		}
		if f := strings.Fields(line); slices.Contains(f, "-o") {
			if i := slices.Index(f, "-o"); i+1 < len(f) {
				binary = f[i+1]
			}
		}
	}
	if binary == "" {
		return append(problems, errors.New("no `go build ... -o BINARY` RUN in the build stage"))
	}
	installed, user, volumes, exposed := "", "", []string{}, []string{}
	for _, cmd := range final.Commands {
		switch c := cmd.(type) {
		case *instructions.CopyCommand:
			if c.From == build.Name && slices.Contains(c.SourcePaths, binary) {
				installed = c.DestPath
			}
		case *instructions.UserCommand:
			user = c.User
		case *instructions.VolumeCommand:
			volumes = append(volumes, c.Volumes...)
		case *instructions.ExposeCommand:
			exposed = append(exposed, c.Ports...)
		case *instructions.RunCommand:
			problems = append(problems, errors.New("the distroless runtime stage has no shell: RUN cannot work there"))
		}
	}
	if installed == "" {
		problems = append(problems, fmt.Errorf("final stage does not COPY --from=%s %s", build.Name, binary))
	}
	if user != "" && user != "nonroot" && !strings.HasPrefix(user, "nonroot:") && !strings.HasPrefix(user, "65532") {
		problems = append(problems, fmt.Errorf("USER %s, want nonroot (65532)", user))
	}
	if user == "" && !strings.HasSuffix(final.BaseName, ":nonroot") {
		problems = append(problems, errors.New("final stage runs as root: no USER and not a :nonroot image"))
	}
	for _, port := range []string{"7070", "7071"} {
		if !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
			problems = append(problems, fmt.Errorf("port %s is not EXPOSEd", port))
		}
	}
	if len(img.entrypoint) == 0 {
		return append(problems, errors.New("final stage has no ENTRYPOINT"))
	}
	if installed != "" && img.entrypoint[0] != installed {
		problems = append(problems, fmt.Errorf("ENTRYPOINT runs %s, but the binary is installed at %s", img.entrypoint[0], installed))
	}
	flags, err := parseCommandLine(img.entrypoint[1:])
	if err != nil {
		return append(problems, fmt.Errorf("ENTRYPOINT: %w", err))
	}
	want := map[string]string{"data-dir": dataDir, "listen": "0.0.0.0:7070", "metrics-listen": "0.0.0.0:7071"}
	for name, value := range want {
		if got, err := flags.one(name); err != nil || got != value {
			problems = append(problems, fmt.Errorf("ENTRYPOINT --%s = %q, want %q", name, got, value))
		}
	}
	if !slices.Contains(volumes, dataDir) {
		problems = append(problems, fmt.Errorf("VOLUME %v does not declare the data dir %s", volumes, dataDir))
	}
	return problems
}

func TestDockerfile(t *testing.T) {
	text, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	img, err := parseDockerfile(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dockerfileProblems(img) {
		t.Error(p)
	}
	t.Run("manifests run the image's binary", func(t *testing.T) {
		base, err := render("base")
		if err != nil {
			t.Fatal(err)
		}
		sts, err := base.statefulSet()
		if err != nil {
			t.Fatal(err)
		}
		c, err := coordinatordContainer(sts)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Command) == 0 || c.Command[0] != img.entrypoint[0] {
			t.Fatalf("container command %v, want the image's binary %s", c.Command, img.entrypoint[0])
		}
	})
}

// TestDockerfileProblems makes sure each promise is checked, by breaking it.
func TestDockerfileProblems(t *testing.T) {
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	tests := []struct {
		name, old, new string
		wantParseErr   bool
	}{
		{name: "cgo enabled", old: "CGO_ENABLED=0", new: "CGO_ENABLED=1"},
		{name: "no trimpath", old: "-trimpath ", new: ""},
		{name: "debug info kept", old: `-ldflags="-s -w `, new: `-ldflags="`},
		{name: "version not stamped", old: ` -X main.buildVersion=${VERSION}`, new: ""},
		{name: "root runtime", old: "static-debian12:nonroot", new: "static-debian12"},
		{name: "root user", old: "USER 65532:65532", new: "USER root"},
		{name: "single stage", old: "FROM gcr.io/distroless/static-debian12:nonroot", new: ""},
		{name: "no volume", old: `VOLUME ["/var/lib/coordinatord"]`, new: `VOLUME ["/data"]`},
		{name: "gRPC port not exposed", old: "EXPOSE 7070/tcp 7071/tcp", new: "EXPOSE 7071/tcp"},
		{name: "wrong data dir", old: `"--data-dir", "/var/lib/coordinatord"`, new: `"--data-dir", "/data"`},
		{name: "loopback listen", old: `"0.0.0.0:7070"`, new: `"127.0.0.1:7070"`},
		{name: "shell form entrypoint", old: `ENTRYPOINT ["/usr/local/bin/coordinatord", "--data-dir"`, new: `ENTRYPOINT /usr/local/bin/coordinatord --data-dir`, wantParseErr: true},
		{name: "lint: stage name casing", old: "AS build", new: "AS Build", wantParseErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(good, tt.old) {
				t.Fatalf("Dockerfile no longer contains %q: update this case", tt.old)
			}
			img, err := parseDockerfile(strings.Replace(good, tt.old, tt.new, 1))
			if tt.wantParseErr {
				if err == nil {
					t.Fatal("parse succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(dockerfileProblems(img)) == 0 {
				t.Fatal("no problem reported")
			}
		})
	}
}

func TestDockerignore(t *testing.T) {
	f, err := os.Open(dockerignorePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path     string
		excluded bool
	}{
		{"go.mod", false},
		{"go.sum", false},
		{"cmd/coordinatord/main.go", false},
		{"internal/statelog/log.go", false},
		{"internal/record/testdata/fuzz/FuzzDecodeRecord/seed", false},
		{"proto/sharecoord/v1/sharecoord.pb.go", false},
		{".git/config", true},
		{"bin/coordinatord", true},
		{"data/__share_group_state-0/00000000000000000000.log", true},
		{"deploy/go.mod", true},
		{"internal/shard/shard.test", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := pm.MatchesOrParentMatches(path.Clean(tt.path))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.excluded {
				t.Fatalf("excluded = %v, want %v", got, tt.excluded)
			}
		})
	}
}
