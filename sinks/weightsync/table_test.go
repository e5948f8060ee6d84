package weightsync

import (
	"testing"

	"swerl/internal/engineapi"
)

func adapter(v int64) engineapi.ServedVersion {
	return engineapi.ServedVersion{Version: v, Adapter: engineapi.AdapterName(v)}
}

// What a request names: the held version, and with follow a newer
// announced adapter, never one the engine answered 404 to; late
// announcements are ignored; any URL of a server names its row.
func TestTableNamed(t *testing.T) {
	tb := NewTable()
	if _, ok := tb.Named("http://h:1/v1", true); ok {
		t.Fatal("an empty table names a version")
	}
	tb.Set("http://h:1/v1/chat/completions", adapter(2))
	tb.Announce("http://h:1", adapter(4))
	tb.Announce("http://h:1/v1", adapter(3)) // late: ignored
	if v, _ := tb.Named("http://h:1", false); v != adapter(2) {
		t.Errorf("without follow: %+v, want the held v2", v)
	}
	if v, _ := tb.Named("http://h:1", true); v != adapter(4) {
		t.Errorf("with follow: %+v, want the announced v4", v)
	}
	if ann, news := tb.Refuse("http://h:1", adapter(2)); ann || news {
		t.Errorf("a 404 to the held adapter counts as announced (%v, %v)", ann, news)
	}
	if ann, news := tb.Refuse("http://h:1", adapter(4)); !ann || !news {
		t.Errorf("first 404 to the announced adapter: %v, %v", ann, news)
	}
	if ann, news := tb.Refuse("http://h:1", adapter(4)); !ann || news {
		t.Errorf("second 404 to the announced adapter: %v, %v", ann, news)
	}
	if v, _ := tb.Named("http://h:1", true); v != adapter(2) {
		t.Errorf("after the 404: %+v, want the held v2", v)
	}
	tb.Announce("http://h:1", adapter(5))
	if v, _ := tb.Named("http://h:1", true); v != adapter(5) {
		t.Errorf("a newer announcement: %+v, want v5", v)
	}
	tb.Set("http://h:1", adapter(6))
	if v, _ := tb.Named("http://h:1", true); v != adapter(6) {
		t.Errorf("a newer held version: %+v, want v6", v)
	}
	tb.Clear("http://h:1")
	if _, ok := tb.Get("http://h:1"); ok {
		t.Error("Clear left the held version")
	}
	if v, _ := tb.Named("http://h:1", true); v != adapter(5) {
		t.Errorf("cleared: %+v, want the announced v5", v)
	}
	if _, ok := tb.Named("http://other:1", true); ok {
		t.Error("another engine names a version")
	}
}
