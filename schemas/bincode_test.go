package schemas_test

import (
	"reflect"
	"testing"

	"swerl/internal/bincode"
	"swerl/internal/bincode/bincodetest"
	"swerl/schemas"
)

// checkBincode round-trips a record whose every field (nested and embedded
// ones included) is set, then every truncation of its bytes: a field added
// to the struct but not to the generated coder fails here, and damage is an
// error, never a panic or a shorter record.
func checkBincode[T any, P interface {
	*T
	AppendBincode([]byte) []byte
	ReadBincode(*bincode.Decoder)
	BincodeSize() int
}](t *testing.T) {
	var v T
	bincodetest.Fill(t, reflect.ValueOf(&v).Elem())
	b := P(&v).AppendBincode(nil)
	var back T
	d := bincode.NewDecoder(b)
	P(&back).ReadBincode(d)
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Fatalf("round trip of a %T changed it:\n got %+v\nwant %+v", v, back, v)
	}
	if n := P(&v).BincodeSize(); n < len(b)/2 {
		t.Errorf("BincodeSize %d for %d bytes", n, len(b))
	}
	for n := range len(b) {
		var short T
		d := bincode.NewDecoder(b[:n])
		P(&short).ReadBincode(d)
		if d.End() == nil {
			t.Fatalf("%T: the first %d of %d bytes decoded", v, n, len(b))
		}
	}
}

func TestBincodeCarriesEveryField(t *testing.T) {
	checkBincode[schemas.Instance](t)
	checkBincode[schemas.Sample](t)
}
