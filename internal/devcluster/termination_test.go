package devcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestATerminatedContainerReportsItsTerminationMessageAsAKubeletDoes: the container's
// terminationMessagePath is a file of the pod's own (an argument naming the path is rewritten
// to it, as every mount path is); after the container exits its content is the message; an
// empty file under FallbackToLogsOnError gives the tail of the log for a failure only.
func TestATerminatedContainerReportsItsTerminationMessageAsAKubeletDoes(t *testing.T) {
	w := testWorker(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "check-0", UID: "uid-2"}})
	c := corev1.Container{Name: "check", Image: "ghcr.io/paddock-dev/paddock:latest",
		Args:                     []string{"storage", "check", "--termination-message-path=" + corev1.TerminationMessagePathDefault},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	argv, _, _, err := w.command(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	file := w.terminationMessageFile("check")
	if want := "--termination-message-path=" + file; !slices.Contains(argv, want) {
		t.Fatalf("argv %q lacks %s", argv, want)
	}
	if got := w.terminationMessage(c, 1); got != "" {
		t.Errorf("no file, no log: message %q", got)
	}
	logPath := filepath.Join(w.node.rt.cfg.Dir, "logs", "pods", containerLogName("ns", "check-0", "check")+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for i := range 100 {
		log.WriteString(strings.Repeat("x", i) + "\n")
	}
	if err := os.WriteFile(logPath, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := w.terminationMessage(c, 0); got != "" {
		t.Errorf("a success with an empty file: message %q, want none (the log is for failures)", got)
	}
	got := w.terminationMessage(c, 1)
	if lines := strings.Split(got, "\n"); len(got) > maxTerminationMessage || lines[len(lines)-1] != strings.Repeat("x", 99) || len(lines) > 80 {
		t.Errorf("a failure falls back to the log's tail: %d bytes, %d lines, last %q", len(got), len(lines), lines[len(lines)-1])
	}
	if err := os.WriteFile(file, []byte("ok every property\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := w.terminationMessage(c, 1); got != "ok every property\n" {
		t.Errorf("the file wins: message %q", got)
	}
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := w.terminationMessage(c, 1); got != "" {
		t.Errorf("File policy, empty file: message %q, want none", got)
	}
}
