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

// versionString describes the build: buildVersion, else the module version Go recorded, with the
// VCS revision when the build recorded one (go build in a git checkout).
func versionString() string {
	v := buildVersion
	bi, ok := debug.ReadBuildInfo()
	if v == "" {
		v = "unknown"
		if ok {
			v = bi.Main.Version
		}
	}
	if !ok {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += " (" + rev
		if modified == "true" {
			v += ", modified"
		}
		v += ")"
	}
	return v + ", " + bi.GoVersion
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

	root.AddCommand(serveCmd, newDumpLogCommand(e), newCheckConfigCommand(e), newRepairLogCommand(e), newBenchCommand(e))
	return root
}
