package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK        = 0
	exitFailure   = 1 // a run-time failure (I/O, a partition that failed, ...)
	exitBadConfig = 2 // bad configuration or usage: nothing was started
)

// exitError carries an exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// loggedError is an error the command has already logged: run does not print it again.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// badConfig marks err as a configuration or usage problem (exit status 2).
func badConfig(err error) error { return &exitError{code: exitBadConfig, err: err} }

// env is the process environment a command runs in; tests substitute their own.
type env struct {
	stdout, stderr io.Writer
	environ        []string
}

func main() {
	if runsServer(os.Args[1:]) {
		// SIGHUP is the server's reload signal: from the start it must not end the process by its
		// default action. serve's reload handler takes it over (Notify undoes Ignore).
		signal.Ignore(syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ()})
	stop()
	os.Exit(code)
}

// runsServer reports whether args run the server: no subcommand (only flags, if anything) or
// "serve".
func runsServer(args []string) bool {
	return len(args) == 0 || args[0] == "serve" || strings.HasPrefix(args[0], "-")
}

// run executes the command line args and returns the exit status. ctx ends when the process is
// asked to stop (SIGINT, SIGTERM).
func run(ctx context.Context, args []string, e env) int {
	root := newRootCommand(e)
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if !errors.As(err, new(loggedError)) {
		fmt.Fprintln(e.stderr, "coordinatord:", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Anything cobra itself rejects (unknown flag or command, bad arguments) is a usage error.
	if isUsageError(err) {
		return exitBadConfig
	}
	return exitFailure
}

// buildVersion is the release the binary was built as, set by the build
// (-ldflags "-X main.buildVersion=..."); empty in a plain go build or go run.
var buildVersion string

// versionString describes the build (see describeBuild) from what Go recorded in the binary.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return describeBuild(buildVersion, bi)
}

// describeBuild describes a build as "VERSION (revision R, committed T, modified), GOVERSION",
// with what the build recorded. VERSION is the stamped one (make build, the image), else the
// main module's version (go install module@version; go build and go install in a git checkout
// record a pseudo-version), else "(devel)". The revision, commit time and modified flag are
// the VCS information go build and go install record in a checkout; go run records none unless
// given -buildvcs=true, and neither does a build with -buildvcs=false. bi is nil when the
// binary has no build information.
func describeBuild(stamped string, bi *debug.BuildInfo) string {
	v := stamped
	if v == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if bi == nil {
		return v
	}
	var details []string
	for _, key := range []string{"vcs.revision", "vcs.time", "vcs.modified"} {
		value, ok := buildSetting(bi, key)
		switch {
		case !ok || value == "":
		case key == "vcs.revision":
			details = append(details, "revision "+value)
		case key == "vcs.time":
			details = append(details, "committed "+value)
		case value == "true":
			details = append(details, "modified")
		}
	}
	if len(details) > 0 {
		v += " (" + strings.Join(details, ", ") + ")"
	}
	if bi.GoVersion != "" {
		v += ", " + bi.GoVersion
	}
	return v
}

// buildSetting returns the value of the build setting key.
func buildSetting(bi *debug.BuildInfo, key string) (string, bool) {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value, true
		}
	}
	return "", false
}

// usageError marks errors from argument validation.
type usageError struct{ error }

func isUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func newRootCommand(e env) *cobra.Command {
	sf := &serveFlags{}
	root := &cobra.Command{
		Use:     "coordinatord",
		Version: versionString(),
		Short:   "A standalone share coordinator: durable share-group state over gRPC",
		Long: "coordinatord stores the delivery state of Kafka share-group partitions (KIP-932) and serves\n" +
			"it over gRPC (sharecoord.v1). With no subcommand it runs the server (same as \"serve\").",
		Args:          args(cobra.NoArgs),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), e, sf)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	sf.register(root)

	serveCmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (the default when no subcommand is given)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), e, sf)
		},
	}
	sf.register(serveCmd)

	root.AddCommand(serveCmd, newDumpLogCommand(e), newCheckConfigCommand(e), newRepairLogCommand(e), newBenchCommand(e),
		newClusterCommand(e))
	return root
}
