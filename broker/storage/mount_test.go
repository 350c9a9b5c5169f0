package storage

import (
	"strings"
	"testing"
)

// mountinfo lines as the kernel writes them: the first six from the development VM this
// package is tested on, the rest as Kubernetes nodes show NFS-backed volumes (an in-cluster
// NFS provisioner's claim, an EFS-style mount, and mounts with the options the check refuses).
const testMountInfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334096k,nr_inodes=3083524,mode=755
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683568k
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
28 27 0:25 / /mnt/sandboxing/model_tools_env/v1/python ro,nosuid,nodev,relatime - tmpfs model_tools_unavailable ro,size=4k,mode=755
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
3417 2892 0:212 / /var/lib/kubelet/pods/f2c2/volumes/kubernetes.io~nfs/pvc-2108 rw,relatime - nfs4 10.20.0.43:/data/k8s/nfs_share/pvc-2108 rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.27,local_lock=none,addr=10.20.0.43
3420 2892 0:215 / /mnt/efs rw,relatime shared:812 - nfs4 fs-0a1b2c3d.efs.eu-west-1.amazonaws.com:/ rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,noresvport,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=172.31.8.9,local_lock=none,addr=172.31.4.4
3421 2892 0:216 / /mnt/v42 rw,relatime - nfs4 filer:/vol rw,vers=4.2,rsize=262144,wsize=262144,namlen=255,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,hard,noac,lookupcache=none,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.1.1.2,local_lock=none,addr=10.1.1.1
3422 2892 0:217 / /mnt/v40 rw,relatime - nfs4 filer:/vol rw,vers=4.0,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.1.1.2,local_lock=none,addr=10.1.1.1
3423 2892 0:218 / /mnt/v3 rw,relatime - nfs filer:/vol rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.1.1.1,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,addr=10.1.1.1
3424 2892 0:219 / /mnt/soft rw,relatime - nfs4 filer:/vol rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.1.1.2,local_lock=none,addr=10.1.1.1
3425 2892 0:220 / /mnt/nocto rw,relatime - nfs4 filer:/vol rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,nocto,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.1.1.2,local_lock=none,addr=10.1.1.1
3426 2892 0:221 / /mnt/with\040space rw,relatime - fuse.s3fs s3fs rw,user_id=0,group_id=0
3427 2892 0:222 / /mnt/ro-data ro,relatime - xfs /dev/sdb1 ro,attr2,inode64,logbufs=8,logbsize=32k,noquota
3428 3420 0:223 / /mnt/efs/nested rw,relatime - ext4 /dev/sdc1 rw`

func TestTheMountCheckRefusesWhatTheStorageRulesCannotSurvive(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		dataDir string
		mount   string
		refused []string // options named by the refusals
	}{
		{"a local disk is accepted", "/var/lib/paddock", "/", nil},
		{"an NFSv4.1 hard mount is accepted", "/var/lib/kubelet/pods/f2c2/volumes/kubernetes.io~nfs/pvc-2108/data", "/var/lib/kubelet/pods/f2c2/volumes/kubernetes.io~nfs/pvc-2108", nil},
		{"an EFS-style mount is accepted", "/mnt/efs/paddock", "/mnt/efs", nil},
		{"attribute caching off and lookupcache=none are accepted too", "/mnt/v42/data", "/mnt/v42", nil},
		{"NFSv4.0 is refused for want of sessions", "/mnt/v40/data", "/mnt/v40", []string{"vers=4.0"}},
		{"NFSv3 is refused", "/mnt/v3", "/mnt/v3", []string{"vers=3"}},
		{"a soft mount is refused", "/mnt/soft/x", "/mnt/soft", []string{"soft"}},
		{"nocto is refused", "/mnt/nocto/x", "/mnt/nocto", []string{"nocto"}},
		{"an object-store FUSE mount is refused, its escaped name read", "/mnt/with space/d", "/mnt/with space", []string{"fuse.s3fs"}},
		{"a read-only mount is refused", "/mnt/ro-data/d", "/mnt/ro-data", []string{"ro"}},
		{"the innermost mount decides", "/mnt/efs/nested/d", "/mnt/efs/nested", nil},
		{"a sibling with a common prefix is not a parent", "/mnt/v40x/d", "/", nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			m, refusals, err := CheckDataDirMount(testMountInfo, tc.dataDir)
			if err != nil {
				t.Fatal(err)
			}
			if m.MountPoint != tc.mount {
				t.Fatalf("mount of %s is %s, want %s", tc.dataDir, m.MountPoint, tc.mount)
			}
			var got []string
			for _, r := range refusals {
				got = append(got, r.Option)
				if r.Reason == "" || !strings.Contains(r.String(), r.Option) {
					t.Errorf("refusal %+v does not say why", r)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.refused, " ") {
				t.Fatalf("refusals %v, want %v", refusals, tc.refused)
			}
		})
	}
}

func TestParseMountInfoNamesALineItCannotRead(t *testing.T) {
	if _, err := ParseMountInfo(testMountInfo + "\n17 1 0:9 /only - nfs4 h:/x rw"); err == nil || !strings.Contains(err.Error(), "line 17") {
		t.Fatalf("a line without its fields: %v, want an error naming line 17", err)
	}
	ms, err := ParseMountInfo(testMountInfo)
	if err != nil || len(ms) != 16 {
		t.Fatalf("%d mounts, %v", len(ms), err)
	}
	if efs := ms[7]; efs.Options["vers"] != "4.1" || efs.Source != "fs-0a1b2c3d.efs.eu-west-1.amazonaws.com:/" || efs.FSType != "nfs4" {
		t.Fatalf("EFS line read as %+v", efs)
	}
}

// FuzzParseMountInfo: any text parses or is refused without a panic, and a parsed mount's
// fields come from its line.
func FuzzParseMountInfo(f *testing.F) {
	f.Add(testMountInfo)
	f.Add("1 1 0:1 / /a\\04 rw - x y z")
	f.Fuzz(func(t *testing.T, text string) {
		ms, err := ParseMountInfo(text)
		if err != nil {
			return
		}
		for _, m := range ms {
			_ = CheckMount(m)
		}
	})
}
