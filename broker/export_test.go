package broker

// RecordChunksMade is how many record chunks (fetch_data.go) the process has made, and their
// size: what the memory of Fetch records read into memory comes to.
func RecordChunksMade() (made int, chunkBytes int64) {
	recordChunks.Lock()
	defer recordChunks.Unlock()
	return recordChunks.made, recordChunk
}
