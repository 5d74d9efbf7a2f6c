package cluster

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	dblogger "github.com/lni/dragonboat/v4/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// dragonboat logs through a process-wide factory that can be set once. Its loggers write to the
// zap logger of the node started last (nodes of one process, in tests, share it): its INFO
// lines at debug level, since it reports every replica start and election at INFO, its
// warnings and errors at their levels, except the Raft protocol's warnings, which report every
// vote, election and dropped request as a warning (the cluster logs leadership changes itself),
// and the configuration's warning that replication is not encrypted, which the server states
// itself.
var (
	engineLogOnce sync.Once
	engineLog     atomic.Pointer[zap.Logger]
)

func routeEngineLogs(logger *zap.Logger) {
	// A peer that is down makes the transport report every failed send: the first lines of a
	// message each second are kept, then one in a hundred.
	engineLog.Store(logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 5, 100)
	})))
	engineLogOnce.Do(func() {
		dblogger.SetLoggerFactory(func(pkg string) dblogger.ILogger {
			return &engineLogger{pkg: pkg}
		})
	})
}

type engineLogger struct {
	pkg   string
	level atomic.Int32
}

func (l *engineLogger) log() *zap.SugaredLogger {
	lg := engineLog.Load()
	if lg == nil {
		lg = zap.NewNop()
	}
	return lg.Named("raft").With(zap.String("component", l.pkg)).WithOptions(zap.AddCallerSkip(2)).Sugar()
}

func (l *engineLogger) enabled(level dblogger.LogLevel) bool {
	return dblogger.LogLevel(l.level.Load()) >= level
}

func (l *engineLogger) SetLevel(level dblogger.LogLevel) { l.level.Store(int32(level)) }

func (l *engineLogger) Debugf(format string, args ...any) {
	if l.enabled(dblogger.DEBUG) {
		l.log().Debugf(format, args...)
	}
}

func (l *engineLogger) Infof(format string, args ...any) {
	if l.enabled(dblogger.INFO) {
		l.log().Debugf(format, args...)
	}
}

func (l *engineLogger) Warningf(format string, args ...any) {
	if l.pkg == "config" || l.pkg == "raft" {
		l.log().Debugf(format, args...)
		return
	}
	l.log().Warnf(format, args...)
}

func (l *engineLogger) Errorf(format string, args ...any) { l.log().Errorf(format, args...) }

func (l *engineLogger) Panicf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log().Error(msg)
	panic(msg)
}
