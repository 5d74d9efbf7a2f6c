package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/datadir"
	"github.com/coordinatord/coordinatord/internal/groupcfg"
	"github.com/coordinatord/coordinatord/internal/journal"
	"github.com/coordinatord/coordinatord/internal/record"
	"github.com/coordinatord/coordinatord/internal/statelog"
	"github.com/coordinatord/coordinatord/internal/tlsconfig"
	"github.com/coordinatord/coordinatord/internal/vfs"
)

// args wraps a positional-argument check so its failures count as usage errors (exit 2).
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func newDumpLogCommand(e env) *cobra.Command {
	return &cobra.Command{
		Use:   "dump-log DIR_OR_SEGMENT",
		Short: "Print every record of a state log as one JSON object per line",
		Long: "dump-log decodes share-group state records (Kafka's __share_group_state layout) and prints\n" +
			"one JSON object per record: offset, type (snapshot, update, tombstone), group, topic_id,\n" +
			"partition and the decoded value. The argument is a partition log directory\n" +
			"(DATA_DIR/" + datadir.PartitionPrefix + "N), a single segment file, or a whole data directory (every\n" +
			"partition in order, each line then also carries state_partition). It only reads, so it is\n" +
			"safe on a running server's data (a record being written may be left out).",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return dumpLog(cmd.Context(), e, a[0])
		},
	}
}

// dumpRecord is one line of dump-log output.
type dumpRecord struct {
	StatePartition *int   `json:"state_partition,omitempty"`
	Offset         int64  `json:"offset"`
	Type           string `json:"type"`
	Group          string `json:"group,omitempty"`
	TopicID        string `json:"topic_id,omitempty"`
	Partition      *int32 `json:"partition,omitempty"`
	Value          any    `json:"value,omitempty"` // record.Record.Value, in its JSON form; nil for a tombstone
	Error          string `json:"error,omitempty"`
}

// dumpLog prints every record under path, reading each log once. Records that do not decode are
// printed with an error and make the command fail at the end; log corruption stops it there,
// after the records before the damage. It stops, with ctx's error, when ctx ends (SIGINT).
func dumpLog(ctx context.Context, e env, path string) error {
	logger, err := newLogger(e.stderr, "warn")
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)

	partitions, err := datadir.Partitions(path)
	if err != nil {
		return err
	}
	if partitions != nil {
		warnJournal(e, path)
	}
	bad := 0
	dumpOne := func(dir string, sp *int) error {
		return statelog.Scan(logger, dir, statelog.Options{}, func(offset int64, b []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			line := decodeForDump(offset, b)
			line.StatePartition = sp
			if line.Error != "" {
				bad++
			}
			return enc.Encode(line)
		})
	}
	if partitions == nil {
		const what = "a partition log directory (DATA_DIR/" + datadir.PartitionPrefix + "N), one of its segment files, or a data directory"
		if err := segmentFileOrDir(path, what); err != nil {
			return err
		}
		if err = dumpOne(path, nil); errors.Is(err, statelog.ErrNoLog) {
			return noLog(path, what)
		}
	} else {
		for _, p := range partitions {
			// A partition directory without log files holds no records: its log was never
			// started, and the server starts it at the next start-up.
			if err = dumpOne(datadir.PartitionDir(path, p), &p); err != nil && !errors.Is(err, statelog.ErrNoLog) {
				break
			}
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("dump %s: %w", path, err)
	}
	if bad > 0 {
		return fmt.Errorf("%d records could not be decoded (see their \"error\" field)", bad)
	}
	return nil
}

// warnJournal says on stderr when the journal of dataDir holds appends past its checkpoint, which
// the state logs dump-log reads may lack until the server starts again.
func warnJournal(e env, dataDir string) {
	n, err := journal.Pending(nil, datadir.JournalDir(dataDir))
	switch {
	case err != nil:
		fmt.Fprintf(e.stderr, "warning: the journal %s could not be read (%v): the state logs may lack its last appends\n", datadir.JournalDir(dataDir), err)
	case n > 0:
		fmt.Fprintf(e.stderr, "warning: the journal %s holds %d batches past its last checkpoint: if its server is not running and did "+
			"not stop cleanly, the state logs below may lack them; start the server once (it appends them to the logs), then dump again\n",
			datadir.JournalDir(dataDir), n)
	}
}

// segmentFileOrDir refuses a path that is neither a directory nor a segment file (*.seg): the
// config store, say. what names the accepted arguments in the refusal.
func segmentFileOrDir(path, what string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() && !statelog.IsSegmentFile(filepath.Base(path)) {
		return usageError{fmt.Errorf("%s is not a segment file (named BASE-ID.seg): give %s", path, what)}
	}
	return nil
}

// noLog is the refusal of a directory that holds no state log (statelog.ErrNoLog): an empty
// directory, or a data directory where a partition's is wanted.
func noLog(path, what string) error {
	return usageError{fmt.Errorf("%s holds no state log: give %s", path, what)}
}

func decodeForDump(offset int64, b []byte) dumpRecord {
	line := dumpRecord{Offset: offset}
	r, err := record.Decode(b)
	if err != nil {
		line.Type = "unknown"
		if errors.Is(err, record.ErrUnknownRecordType) {
			line.Type = r.Type.String()
		}
		line.Error = err.Error()
		return line
	}
	line.Group = r.Key.GroupID
	line.TopicID = r.Key.TopicID.String()
	line.Partition = &r.Key.Partition
	line.Type = r.Type.String()
	if r.Tombstone {
		line.Type = "tombstone"
	}
	line.Value = r.Value()
	return line
}

func newCheckConfigCommand(e env) *cobra.Command {
	var src groupcfg.Sources
	cmd := &cobra.Command{
		Use:   "check-config",
		Short: "Report every broker-configuration problem a start would hit, without starting",
		Long: "check-config resolves the broker configuration exactly as the server does (properties file,\n" +
			"COORDINATORD_* environment, --override; same precedence), loads the TLS files it names, and\n" +
			"prints every problem, one per line, naming the key, the value, the allowed range and the fix.\n" +
			"Run it before an upgrade: share.coordinator.snapshot.update.records.per.snapshot must now be in\n" +
			"[200, 1000]. It does not look at a data directory (the partition count recorded there, whether\n" +
			"its file system supports state.log.sync=filesystem) nor at the server's other flags.\n" +
			"Exit status 0 when the configuration would start, 2 otherwise.",
		Args: args(cobra.NoArgs),
		RunE: func(_ *cobra.Command, _ []string) error {
			src.Env = e.environ
			problems := checkConfig(src)
			for _, p := range problems {
				fmt.Fprintln(e.stdout, p)
			}
			if len(problems) > 0 {
				return badConfig(fmt.Errorf("%d configuration problem(s): the server would refuse to start", len(problems)))
			}
			fmt.Fprintln(e.stdout, "configuration OK")
			return nil
		},
	}
	cmd.Flags().StringVar(&src.File, "config", "", "the properties file to check")
	cmd.Flags().StringArrayVar(&src.Overrides, "override", nil, "a KEY=VALUE override, as given to the server (repeatable)")
	return cmd
}

// checkConfig returns, one line each, every problem the server's start would refuse: the broker
// configuration's, then how the security keys fit together and whether their files load.
func checkConfig(src groupcfg.Sources) []string {
	static, err := groupcfg.LoadStatic(src)
	var se *groupcfg.StaticError
	if errors.As(err, &se) {
		out := make([]string, len(se.Problems))
		for i, p := range se.Problems {
			out[i] = p.String()
		}
		return out // the security checks read values that are not valid yet
	}
	if err != nil {
		return []string{err.Error()}
	}
	settings, problems := readSecuritySettings(static.Broker())
	if len(problems) == 0 && settings.tls {
		if err := tlsconfig.Check(settings.files); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems
}

func newRepairLogCommand(e env) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "repair-log DIR",
		Short: "Truncate a corrupted state log at the corruption point (asks for --yes)",
		Long: "repair-log checks the partition log in DIR (DATA_DIR/" + datadir.PartitionPrefix + "N). Without --yes it only\n" +
			"reports the corruption and what a repair would drop. With --yes it truncates the damaged\n" +
			"segment at the corruption point, deletes every later segment, and prints exactly what was\n" +
			"dropped. Records after the corruption point are lost: take a copy of DIR first. Run it only\n" +
			"while the server is stopped.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error {
			return repairLog(e, a[0], yes)
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really truncate (without it, only report)")
	return cmd
}

func repairLog(e env, dir string, yes bool) error {
	logger, err := newLogger(e.stderr, "warn")
	if err != nil {
		return err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageError{fmt.Errorf("%s is not a partition log directory", dir)}
	}
	// Without --yes, the repair itself runs over an overlay that keeps its changes in memory.
	repairLogger, opts := zap.NewNop(), statelog.Options{FS: vfs.Overlay(vfs.OS())}
	if yes {
		repairLogger, opts = logger, statelog.Options{}
	}
	report, err := statelog.Repair(repairLogger, dir, opts)
	if errors.Is(err, statelog.ErrNoLog) {
		return noLog(dir, "one state partition's log directory (DATA_DIR/"+datadir.PartitionPrefix+"N)")
	}
	if err != nil {
		return fmt.Errorf("repair %s: %w", dir, err)
	}
	if len(report.Corruptions) == 0 && !report.StartOffsetReset && report.TornTail == nil {
		fmt.Fprintf(e.stdout, "no corruption found in %s; nothing to repair\n", dir)
		return nil
	}
	printRepair(e.stdout, report, !yes)
	if !yes {
		fmt.Fprintln(e.stdout, "run again with --yes to repair (take a copy of the directory first)")
		if len(report.Corruptions) == 0 && !report.StartOffsetReset {
			return &exitError{code: exitFailure, err: errors.New("the log ends in a torn tail; nothing changed")}
		}
		return &exitError{code: exitFailure, err: errors.New("log is corrupted; nothing changed")}
	}
	return nil
}

// printRepair prints what a repair did or, for a dry run, would do.
func printRepair(w io.Writer, r statelog.RepairReport, dryRun bool) {
	say := func(did, would string) string {
		if dryRun {
			return "a repair would " + would
		}
		return did
	}
	for _, c := range r.Corruptions {
		fmt.Fprintf(w, "corruption: %v\n", c)
	}
	if r.TruncatedSegment != "" {
		fmt.Fprintf(w, "%s %s to %d bytes\n", say("truncated", "truncate"), r.TruncatedSegment, r.TruncatedAt)
	}
	for _, s := range r.DeletedSegments {
		fmt.Fprintf(w, "%s %s\n", say("deleted", "delete"), s)
	}
	if r.DroppedBytes > 0 {
		gone := "is gone"
		if dryRun {
			gone = "would be lost"
		}
		fmt.Fprintf(w, "%s %d bytes: every record from offset %d on %s\n", say("dropped", "drop"), r.DroppedBytes, r.DroppedFromOffset, gone)
	}
	if r.StartOffsetReset {
		fmt.Fprintf(w, "%s the log-start offset from %d to %d\n", say("reset", "reset"), r.OldStartOffset, r.NewStartOffset)
	}
	if t := r.TornTail; t != nil {
		fmt.Fprintf(w, "torn tail: %s at byte %d: %s\n", t.Segment, t.At, t.Reason)
		fmt.Fprintf(w, "%s the torn tail: %d bytes, the last append of the log (what a crash in the middle of an append "+
			"leaves; if that append was acknowledged, it was damaged afterwards; the server also truncates it on start)\n",
			say("truncated", "truncate"), t.Bytes)
	}
	after := "after the repair"
	if dryRun {
		after = "after a repair"
	}
	if r.StartOffset == r.EndOffset {
		fmt.Fprintf(w, "%s the log holds no records (its offsets start and end at %d): the state of every share partition in it is gone\n",
			after, r.EndOffset)
		return
	}
	fmt.Fprintf(w, "%s the log holds the records from offset %d up to %d\n", after, r.StartOffset, r.EndOffset)
}
