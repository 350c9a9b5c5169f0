package broker

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// The data volume is shared by every broker of the cluster, so each reports the same
// numbers: a dashboard takes the max over a cluster's brokers.
var (
	descVolumeSize = prometheus.NewDesc("paddock_volume_size_bytes",
		"Size of the file system holding --data-dir (statfs).", nil, nil)
	descVolumeFree = prometheus.NewDesc("paddock_volume_available_bytes",
		"Bytes of the file system holding --data-dir that the broker may still write (statfs: blocks available to unprivileged users).", nil, nil)
	descVolumeUsed = prometheus.NewDesc("paddock_volume_used_bytes",
		"Bytes in use on the file system holding --data-dir (statfs: total minus free blocks).", nil, nil)
)

func describeVolume(ch chan<- *prometheus.Desc) {
	ch <- descVolumeSize
	ch <- descVolumeFree
	ch <- descVolumeUsed
}

// collectVolume sends the volume's series; nothing when statfs fails (a missing directory
// before the first write), so no made-up zero reaches a free-space alert.
func collectVolume(ch chan<- prometheus.Metric, dir string) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return
	}
	bs := float64(st.Bsize)
	ch <- prometheus.MustNewConstMetric(descVolumeSize, prometheus.GaugeValue, float64(st.Blocks)*bs)
	ch <- prometheus.MustNewConstMetric(descVolumeFree, prometheus.GaugeValue, float64(st.Bavail)*bs)
	ch <- prometheus.MustNewConstMetric(descVolumeUsed, prometheus.GaugeValue, float64(st.Blocks-st.Bfree)*bs)
}
