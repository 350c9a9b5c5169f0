package storagecheck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"os"
	"strings"
	"time"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/storage"
)

// Exit codes of `paddock storage check`.
const (
	ExitVerified = 0 // every property held (the peer: the checker finished)
	ExitFailed   = 1 // a property failed
	ExitUsage    = 2 // bad flags
	ExitNotRun   = 3 // the check could not run: no peer, an I/O error, the timeout
)

// Options are the flags of `paddock storage check`.
type Options struct {
	// DataDir is the data volume as this node mounts it.
	DataDir string
	// Peer is the peer's host:port: this process is the checker.
	Peer string
	// ServeAddress is where the peer serves: this process is the peer.
	ServeAddress string
	// ByJobIndex picks the role from JOB_COMPLETION_INDEX (an Indexed Job's pods): 0 checks
	// against Peer, 1 serves on ServeAddress.
	ByJobIndex bool
	// Local runs both roles in this process, the peer on a loopback port: the whole protocol
	// on one machine, for a person trying it and for tests.
	Local bool
	// Rounds is how many times CheckVolume tries each property (≤ 0: its default).
	Rounds int
	// Timeout bounds the whole run, the wait for the peer (or the checker) included.
	Timeout time.Duration
	// TerminationMessagePath, when set, receives the checker's per-property summary
	// (v1alpha1.FormatStorageCheckResults), or the reason the check did not run.
	TerminationMessagePath string
	// PeerFS wraps the peer's file system (tests make it lack a property); nil is the real one.
	PeerFS storage.FS
}

// Main is `paddock storage check`: args are the arguments after "storage".
func Main(args []string) int { return run(args, os.Stdout, os.Stderr) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "Usage: paddock storage check --data-dir DIR (--local | --peer HOST:PORT | --serve-address ADDR | --by-job-index --peer ... --serve-address ...)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return ExitUsage
	}
	o, code, ok := parse(args[1:], stderr)
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	return Run(ctx, o, stdout, stderr)
}

func parse(args []string, stderr io.Writer) (Options, int, bool) {
	var o Options
	fs := flag.NewFlagSet("paddock storage check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.DataDir, "data-dir", "", "the data volume as this node mounts it; required")
	fs.StringVar(&o.Peer, "peer", "", "the checker: the peer's host:port")
	fs.StringVar(&o.ServeAddress, "serve-address", "", "the peer: where to serve the file-system calls")
	fs.BoolVar(&o.ByJobIndex, "by-job-index", false, "take the role from JOB_COMPLETION_INDEX: 0 checks against --peer, 1 serves on --serve-address")
	fs.BoolVar(&o.Local, "local", false, "run both roles in this process (the peer on a loopback port)")
	fs.IntVar(&o.Rounds, "rounds", 50, "how many times each property is tried")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long the whole run may take, waiting for the other role included")
	fs.StringVar(&o.TerminationMessagePath, "termination-message-path", "", "write the checker's per-property summary here (a pod's terminationMessagePath)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: paddock storage check --data-dir DIR (--local | --peer HOST:PORT | --serve-address ADDR | --by-job-index --peer HOST:PORT --serve-address ADDR)")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Exercises a shared volume from two nodes: exclusive create and link races, rename atomicity,")
		fmt.Fprintln(stderr, "fsync then read on the other node, close-to-open, listing freshness (docs/storage.md, \"The storage check\").")
		fmt.Fprintln(stderr, "Exit 0: every property held; 1: a property failed; 2: usage; 3: the check could not run.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0, false
		}
		return o, ExitUsage, false
	}
	if o.ByJobIndex {
		switch idx := os.Getenv("JOB_COMPLETION_INDEX"); idx {
		case "0":
			o.ServeAddress = ""
		case "1":
			o.Peer = ""
		default:
			fmt.Fprintf(stderr, "paddock storage check: --by-job-index needs JOB_COMPLETION_INDEX 0 or 1, got %q\n", idx)
			return o, ExitUsage, false
		}
	}
	roles := 0
	for _, set := range []bool{o.Local, o.Peer != "", o.ServeAddress != ""} {
		if set {
			roles++
		}
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "paddock storage check: unexpected arguments %q\n", fs.Args())
	case o.DataDir == "":
		fmt.Fprintln(stderr, "paddock storage check: --data-dir is required")
	case roles != 1:
		fmt.Fprintln(stderr, "paddock storage check: give exactly one of --local, --peer, --serve-address (or --by-job-index with both)")
	default:
		return o, 0, true
	}
	fs.Usage()
	return o, ExitUsage, false
}

// Run runs the role o names until it is done or ctx ends, and returns the exit code.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	switch {
	case o.ServeAddress != "":
		return runPeer(ctx, o, stdout, stderr)
	case o.Local:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return notRun(o, stderr, fmt.Errorf("listen on loopback: %w", err))
		}
		defer func() { _ = l.Close() }()
		if _, err := servePeer(l, o.DataDir, o.peerFS()); err != nil {
			return notRun(o, stderr, err)
		}
		o.Peer = l.Addr().String()
	}
	return runChecker(ctx, o, stdout, stderr)
}

func (o Options) peerFS() storage.FS {
	if o.PeerFS != nil {
		return o.PeerFS
	}
	return storage.OSFS{}
}

// runPeer serves until the checker says it is done.
func runPeer(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	l, err := net.Listen("tcp", o.ServeAddress)
	if err != nil {
		return notRun(o, stderr, fmt.Errorf("listen on %s: %w", o.ServeAddress, err))
	}
	defer func() { _ = l.Close() }()
	p, err := servePeer(l, o.DataDir, o.peerFS())
	if err != nil {
		return notRun(o, stderr, err)
	}
	fmt.Fprintf(stdout, "Serving %s to the storage checker on %s\n", o.DataDir, l.Addr())
	select {
	case summary := <-p.done:
		fmt.Fprintf(stdout, "The checker is done:\n%s", summary)
		writeMessage(o, stderr, "peer: served the checker\n")
		return ExitVerified
	case <-ctx.Done():
		return notRun(o, stderr, fmt.Errorf("no checker finished within the timeout: %w", ctx.Err()))
	}
}

// runChecker dials the peer (retrying: its name may not resolve yet), runs CheckVolume with
// this node as a and the peer as b, and reports.
func runChecker(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	c, err := dialPeer(ctx, o.Peer)
	if err != nil {
		return notRun(o, stderr, err)
	}
	defer func() { _ = c.Close() }()
	peer := remoteFS{c}
	var root Answer
	if err := c.Call("FS.Root", struct{}{}, &root); err != nil {
		return notRun(o, stderr, fmt.Errorf("ask the peer for its data directory: %w", err))
	}
	started := time.Now()
	report, err := storage.CheckVolume(ctx, storage.OSFS{}, peer, o.DataDir, root.Root, o.Rounds)
	if err != nil {
		_ = c.Call("FS.Done", DoneArgs{Summary: "error: " + err.Error() + "\n"}, &Answer{})
		return notRun(o, stderr, err)
	}
	summary := v1alpha1.FormatStorageCheckResults(results(report))
	_ = c.Call("FS.Done", DoneArgs{Summary: summary}, &Answer{}) // the peer exits either way at its timeout
	fmt.Fprintf(stdout, "Storage check of %s (this node) and %s (peer %s), %v:\n%s", o.DataDir, root.Root, o.Peer, time.Since(started).Round(time.Millisecond), report)
	fmt.Fprintf(stdout, "--- summary\n%s", summary)
	writeMessage(o, stderr, summary)
	if !report.OK() {
		return ExitFailed
	}
	return ExitVerified
}

// results is report as the termination message carries it.
func results(report storage.VolumeReport) []v1alpha1.StorageCheckResult {
	out := make([]v1alpha1.StorageCheckResult, len(report.Properties))
	for i, p := range report.Properties {
		out[i] = v1alpha1.StorageCheckResult{Property: p.Name, OK: p.OK, Detail: p.Detail}
	}
	return out
}

func dialPeer(ctx context.Context, addr string) (*rpc.Client, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return rpc.NewClient(conn), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reach the peer at %s: %w", addr, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// notRun reports why the check did not run and returns ExitNotRun.
func notRun(o Options, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "paddock storage check: %v\n", err)
	writeMessage(o, stderr, "error: "+strings.ReplaceAll(err.Error(), "\n", " ")+"\n")
	return ExitNotRun
}

func writeMessage(o Options, stderr io.Writer, msg string) {
	if o.TerminationMessagePath == "" {
		return
	}
	if err := os.WriteFile(o.TerminationMessagePath, []byte(msg), 0o644); err != nil {
		fmt.Fprintf(stderr, "paddock storage check: write the termination message: %v\n", err)
	}
}
