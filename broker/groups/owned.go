package groups

// OwnedChanged returns a channel closed at the next change of Owned: a group taken over, or
// one that finished unloading. Take it before reading Owned, so no change slips between
// (the SIGTERM drain waits on it for Owned to reach 0).
func (c *Coordinator) OwnedChanged() <-chan struct{} { return c.ownedChanged.Changed() }
