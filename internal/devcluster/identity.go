package devcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What the tests use to check who each process is: where a pod process could find the admin
// credentials, and the apiserver's audit log.

// ProcessPath is where this process finds path as process pid sees it: through
// /proc/<pid>/root, its own mount namespace. An absolute symlink on the way would resolve in
// this process's root instead, so the one that matters (/var/run → /run) is resolved first.
func ProcessPath(pid int, path string) string {
	if rel, ok := runRelative(path); ok {
		path = filepath.Join(hostRunDir(), rel)
	}
	return filepath.Join("/proc", strconv.Itoa(pid), "root", path)
}

// AdminCredentialExposure lists every way the process pid can get at the environment's admin
// credentials: its environment (KUBECONFIG, or the admin token in any variable), its open
// files (one of the admin files, or any file holding the admin token), the admin files as its
// own mount namespace shows them, and capabilities that could undo that. Empty means none.
func (e *Env) AdminCredentialExposure(pid int) ([]string, error) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	token := []byte(e.restConfig.BearerToken)
	pkiDir := filepath.Join(e.cfg.Dir, "pki")
	var found []string
	for _, look := range []func() ([]string, error){
		func() ([]string, error) { return environmentExposure(proc, token) },
		func() ([]string, error) { return openFileExposure(proc, token, e.cfg.KubeconfigPath(), pkiDir) },
		func() ([]string, error) {
			return mountExposure(pid, e.cfg.KubeconfigPath(), filepath.Join(pkiDir, tokenFile), filepath.Join(pkiDir, saKeyFile))
		},
		func() ([]string, error) { return capabilityExposure(proc) },
	} {
		more, err := look()
		if err != nil {
			return nil, err
		}
		found = append(found, more...)
	}
	return found, nil
}

// environmentExposure: KUBECONFIG, or the admin token in any variable of the process proc.
func environmentExposure(proc string, token []byte) ([]string, error) {
	environ, err := os.ReadFile(filepath.Join(proc, "environ"))
	if err != nil {
		return nil, fmt.Errorf("read environment of %s: %w", proc, err)
	}
	var found []string
	for _, kv := range bytes.Split(environ, []byte{0}) {
		name, _, _ := strings.Cut(string(kv), "=")
		if name == "KUBECONFIG" {
			found = append(found, "environment variable "+string(kv))
		}
		if bytes.Contains(kv, token) {
			found = append(found, "environment variable "+name+" holds the admin token")
		}
	}
	return found, nil
}

// openFileExposure: an open file of the process proc that is the admin kubeconfig or under
// the pki directory, or that holds the admin token.
func openFileExposure(proc string, token []byte, kubeconfig, pkiDir string) ([]string, error) {
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return nil, fmt.Errorf("list open files of %s: %w", proc, err)
	}
	var found []string
	for _, fd := range fds {
		fdPath := filepath.Join(proc, "fd", fd.Name())
		target, err := os.Readlink(fdPath)
		if err != nil {
			continue // closed meanwhile
		}
		if target == kubeconfig || strings.HasPrefix(target, pkiDir+"/") {
			found = append(found, fmt.Sprintf("open file %s: %s", fd.Name(), target))
			continue
		}
		if fi, err := os.Stat(fdPath); err == nil && fi.Mode().IsRegular() {
			if b, err := os.ReadFile(fdPath); err == nil && bytes.Contains(b, token) {
				found = append(found, fmt.Sprintf("open file %s (%s) holds the admin token", fd.Name(), target))
			}
		}
	}
	return found, nil
}

// mountExposure: an admin file readable, and not empty, in pid's own view of the filesystem
// (its mount namespace, through /proc/<pid>/root).
func mountExposure(pid int, paths ...string) ([]string, error) {
	var found []string
	for _, p := range paths {
		b, err := os.ReadFile(ProcessPath(pid, p))
		if err == nil && len(b) > 0 {
			found = append(found, "readable in its mount namespace: "+p)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read %s as %d sees it: %w", p, pid, err)
		}
	}
	return found, nil
}

// capabilityExposure: effective capabilities of the process proc, with which it could unmount
// what hides the admin files.
func capabilityExposure(proc string) ([]string, error) {
	status, err := os.ReadFile(filepath.Join(proc, "status"))
	if err != nil {
		return nil, fmt.Errorf("read status of %s: %w", proc, err)
	}
	var found []string
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok && strings.Trim(strings.TrimSpace(v), "0") != "" {
			found = append(found, "effective capabilities "+strings.TrimSpace(v))
		}
	}
	return found, nil
}

// AuditEvent is the part of an apiserver audit event (audit.k8s.io/v1) the tests read.
type AuditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string              `json:"username"`
		Groups   []string            `json:"groups"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage string `json:"stage"`
}

// PodName is the pod a bound ServiceAccount token authenticated the request for, or "".
func (ev AuditEvent) PodName() string {
	if v := ev.User.Extra["authentication.kubernetes.io/pod-name"]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// AuditEvents reads the audit log, oldest first (a watch logs when it starts and when it ends).
func (e *Env) AuditEvents() ([]AuditEvent, error) {
	f, err := os.Open(e.AuditLogPath())
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	var events []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// The apiserver may be writing the last line right now.
			continue
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return events, nil
}
