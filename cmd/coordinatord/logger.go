package main

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger builds the process logger: JSON when w is not a terminal (containers, files),
// human-readable console output otherwise. Nothing is sampled here; the gRPC call logger samples
// its own per-call entries below WARN (see service.NewServer). Stack traces go only with panics:
// an error entry already says what failed, and a failing disk can produce thousands of them.
func newLogger(w io.Writer, level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil || lvl > zapcore.ErrorLevel {
		return nil, fmt.Errorf("--log-level %q: want one of debug, info, warn, error", level)
	}
	var enc zapcore.Encoder
	if isTerminal(w) {
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		enc = zapcore.NewConsoleEncoder(cfg)
	} else {
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.DPanicLevel)), nil
}

// isTerminal reports whether w is a character device (an interactive terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
