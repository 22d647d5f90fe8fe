package dispatcher

import "testing"

// A store takes at most two batches of DONE writes at a time: the third
// batch's events wait for room, which a write gives back; another store's
// room is its own. (A deeper queue held a slow store's events for longer
// than their Lease.)
func TestDoneLaneAdmitsTwoBatchesPerStore(t *testing.T) {
	b := newDoneBatcher(&Dispatcher{cfg: Config{DoneBatchSize: 3}})
	slow, other := &origin{id: "slow"}, &origin{id: "other"}
	for i := range 6 {
		if room := b.admit(slow); room != nil {
			t.Fatalf("event %d of the slow store refused within two batches", i+1)
		}
	}
	room := b.admit(slow)
	if room == nil {
		t.Fatal("a seventh event admitted past two batches of 3")
	}
	if b.admit(other) != nil {
		t.Error("another store's event refused: its room is its own")
	}
	select {
	case <-room:
		t.Fatal("room signalled before any write")
	default:
	}
	b.written(slow, 3)
	select {
	case <-room:
	default:
		t.Fatal("a write gave back no room")
	}
	for i := range 3 {
		if b.admit(slow) != nil {
			t.Fatalf("event %d refused after a batch was written", i+1)
		}
	}
	if b.admit(slow) == nil {
		t.Error("admitted past two batches again")
	}
	b.written(slow, 6)
	b.written(other, 1)
	if len(b.queued) != 0 {
		t.Errorf("queued keeps %d stores with nothing queued", len(b.queued))
	}
}
