package parquetio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Every read of a Parquet file in swerl goes through openFile: the bytes
// come from disk and may be damaged or hostile, and parquet-go trusts its
// input. Damaged footers made parquet.OpenFile panic (slice bounds out of
// range in ReadPageIndex, 4 to 11 of every 300-400 random footer
// mutations) and lengths in a footer or page header make it allocate up to
// gigabytes before reading anything (a fatal out of memory no recover
// catches). So before parquet-go sees a file, openFile
//
//   - walks the footer's thrift bytes without allocating, requiring every
//     list and binary to fit in the footer and what decoding will allocate
//     to stay under maxFooterAlloc (checkThrift);
//   - checks the decoded metadata: a consistent schema tree, row groups
//     with one chunk a leaf column, every chunk inside the file, codecs
//     whose output it can bound (UNCOMPRESSED, SNAPPY, ZSTD);
//   - walks every page header of every chunk the same way and bounds each
//     page: its bytes inside its chunk, at most maxPageBytes once
//     decompressed (from the snappy length or the zstd frame and block
//     headers, without decompressing) and at most maxPageValues values;
//
// then opens it with the page index and bloom filters skipped (swerl reads
// files whole and never uses them; the page index is where the reported
// panics were) and pages read synchronously, so that no parquet-go
// goroutine can panic out of reach. Every parquet-go call that reads runs
// under guard, which turns a panic that gets through into ErrCorrupt
// naming the file.

// ErrCorrupt is wrapped by every error about a damaged or unreadable
// Parquet file (as opposed to an error of the file system).
var ErrCorrupt = errors.New("damaged or unsupported Parquet file")

// Bounds on what reading one file may allocate.
const (
	// maxFooterBytes bounds the footer (file metadata); swerl's largest
	// footers, files of many row groups, are well under a megabyte.
	maxFooterBytes = 16 << 20
	// maxFooterAlloc bounds what decoding the footer allocates for its
	// lists (Go structs are several times their encoded size).
	maxFooterAlloc = 256 << 20
	// maxPageBytes bounds one page, compressed or not. swerl writes pages
	// of about 1 MiB; a page holds at least one value, and the largest
	// values (an instance's code context) are a few MiB.
	maxPageBytes = 256 << 20
	// maxPageValues bounds the values of one page: the decoder allocates
	// levels and offsets by this count. 1 MiB pages of booleans hold 8M.
	maxPageValues = 1 << 24
	// maxRowsPerByte bounds the rows of a file by its size.
	maxRowsPerByte = 64
	// maxPageHeaderBytes bounds one page header (statistics included).
	maxPageHeaderBytes = 16 << 20
)

// corrupt returns an error wrapping ErrCorrupt that names path.
func corrupt(path, format string, args ...any) error {
	return fmt.Errorf("parquetio: read %s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
}

// guard runs fn, turning a panic into an error wrapping ErrCorrupt that
// names path and what was being done. fn must only call into parquet-go
// (or code that owns no state outliving it): after a panic the values it
// was using are abandoned, never used again.
func guard(path, what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = corrupt(path, "%s: parquet-go panicked: %v", what, p)
		}
	}()
	return fn()
}

// file is a Parquet file opened for reading by openFile.
type file struct {
	path string
	os   *os.File
	pf   *parquet.File
}

func (f *file) Close() error { return f.os.Close() }

// openFile opens the file at path after the checks above.
func openFile(path string) (*file, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("parquetio: %w", err)
	}
	st, err := osf.Stat()
	if err != nil {
		osf.Close()
		return nil, fmt.Errorf("parquetio: %w", err)
	}
	if !st.Mode().IsRegular() {
		osf.Close()
		return nil, fmt.Errorf("parquetio: read %s: not a regular file", path)
	}
	pf, err := openReaderAt(path, osf, st.Size())
	if err != nil {
		osf.Close()
		return nil, err
	}
	return &file{path: path, os: osf, pf: pf}, nil
}

// openReaderAt checks and opens size bytes of r; name is used in errors.
func openReaderAt(name string, r io.ReaderAt, size int64) (*parquet.File, error) {
	if err := checkFile(name, r, size); err != nil {
		return nil, err
	}
	var pf *parquet.File
	err := guard(name, "open", func() error {
		var err error
		pf, err = parquet.OpenFile(r, size, &parquet.FileConfig{
			SkipPageIndex:    true,
			SkipBloomFilters: true,
			ReadMode:         parquet.ReadModeSync,
		})
		return err
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, corrupt(name, "%v", err)
	}
	return pf, nil
}

var (
	fileMetaDataType = reflect.TypeFor[format.FileMetaData]()
	pageHeaderType   = reflect.TypeFor[format.PageHeader]()
)

// checkFile does the checks of openFile that come before parquet-go.
func checkFile(name string, r io.ReaderAt, size int64) error {
	if size < 12 {
		return corrupt(name, "%d bytes, too small for a Parquet file", size)
	}
	var head, tail [8]byte
	if _, err := r.ReadAt(head[:4], 0); err != nil {
		return fmt.Errorf("parquetio: read %s: %w", name, err)
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("parquetio: read %s: %w", name, err)
	}
	if string(head[:4]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return corrupt(name, "no PAR1 magic at both ends (encrypted files are not supported)")
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footerLen > size-12 || footerLen > maxFooterBytes {
		return corrupt(name, "footer of %d bytes in a file of %d (at most %d)", footerLen, size, min(size-12, maxFooterBytes))
	}
	footer := make([]byte, footerLen)
	dataEnd := size - 8 - footerLen
	if _, err := r.ReadAt(footer, dataEnd); err != nil {
		return fmt.Errorf("parquetio: read %s: %w", name, err)
	}
	n, alloc, err := checkThrift(footer, fileMetaDataType, false)
	switch {
	case err != nil:
		return corrupt(name, "footer: %v", err)
	case n != len(footer):
		return corrupt(name, "footer: %d trailing bytes", len(footer)-n)
	case alloc > maxFooterAlloc:
		return corrupt(name, "footer would take %d MiB to decode (at most %d)", alloc>>20, maxFooterAlloc>>20)
	}
	var md format.FileMetaData
	err = guard(name, "decode footer", func() error { return thrift.Unmarshal(new(thrift.CompactProtocol), footer, &md) })
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		return corrupt(name, "footer: %v", err)
	}
	repeated, err := checkSchema(md.Schema)
	if err != nil {
		return corrupt(name, "schema: %v", err)
	}
	if md.NumRows < 0 {
		return corrupt(name, "%d rows", md.NumRows)
	}
	// Rows cost reading time, not only bytes: a few bytes of RLE levels
	// can declare millions of empty rows. swerl's rows take tens of bytes
	// or more; maxRowsPerByte leaves a wide margin.
	maxRows := max(size*maxRowsPerByte, 1<<16)
	var rows int64
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		if rg.NumRows < 0 || rg.NumRows > maxRows-rows {
			return corrupt(name, "row group %d: %d rows (at most %d in %d bytes)", i, rg.NumRows, maxRows, size)
		}
		rows += rg.NumRows
		if len(rg.Columns) != len(repeated) {
			return corrupt(name, "row group %d: %d column chunks for %d leaf columns", i, len(rg.Columns), len(repeated))
		}
		for j := range rg.Columns {
			// A column outside any list has one value (or null) a row.
			maxValues := int64(maxPageValues)
			if !repeated[j] {
				maxValues = min(maxValues, rg.NumRows)
			}
			if err := checkChunk(r, &rg.Columns[j], dataEnd, maxValues); err != nil {
				return corrupt(name, "row group %d, column %d: %v", i, j, err)
			}
		}
	}
	return nil
}

// checkSchema checks that the flattened schema is one tree (every
// num_children within the list, every element used once) and returns, for
// each leaf column in order, whether it is inside a repeated field.
func checkSchema(s []format.SchemaElement) ([]bool, error) {
	if len(s) == 0 {
		return nil, errors.New("no root")
	}
	var leaves []bool
	var walk func(i, depth int, inRepeated bool) (int, error)
	walk = func(i, depth int, inRepeated bool) (int, error) {
		if depth > maxThriftDepth {
			return 0, fmt.Errorf("nested more than %d levels", maxThriftDepth)
		}
		e := &s[i]
		inRepeated = inRepeated || (e.RepetitionType.Valid && e.RepetitionType.V == format.Repeated)
		n := 0
		if e.NumChildren.Valid {
			n = int(e.NumChildren.V)
		}
		if n < 0 || n > len(s)-i-1 {
			return 0, fmt.Errorf("element %d (%q) has %d children", i, e.Name, n)
		}
		if n == 0 && i > 0 {
			if !e.Type.Valid {
				return 0, fmt.Errorf("leaf %q has no type", e.Name)
			}
			leaves = append(leaves, inRepeated)
			return i + 1, nil
		}
		next := i + 1
		for range n {
			if next >= len(s) {
				return 0, fmt.Errorf("element %d (%q) has %d children, the schema ends first", i, e.Name, n)
			}
			var err error
			if next, err = walk(next, depth+1, inRepeated); err != nil {
				return 0, err
			}
		}
		return next, nil
	}
	end, err := walk(0, 0, false)
	if err != nil {
		return nil, err
	}
	if end != len(s) {
		return nil, fmt.Errorf("%d elements outside the tree", len(s)-end)
	}
	return leaves, nil
}

// checkChunk checks a column chunk's metadata and walks its pages.
// A page holds at most maxValues values.
func checkChunk(r io.ReaderAt, c *format.ColumnChunk, dataEnd, maxValues int64) error {
	md := &c.MetaData
	switch {
	case c.FilePath != "":
		return fmt.Errorf("data in another file (%q)", c.FilePath)
	case len(c.EncryptedColumnMetadata) > 0:
		return errors.New("encrypted")
	case md.NumValues < 0 || md.TotalCompressedSize < 0:
		return fmt.Errorf("%d values in %d bytes", md.NumValues, md.TotalCompressedSize)
	}
	switch md.Codec {
	case format.Uncompressed, format.Snappy, format.Zstd:
	default:
		return fmt.Errorf("compression %s is not supported (UNCOMPRESSED, SNAPPY and ZSTD are)", md.Codec)
	}
	base := md.DataPageOffset
	if md.DictionaryPageOffset != 0 {
		base = md.DictionaryPageOffset
	}
	if base < 4 || base > dataEnd || md.TotalCompressedSize > dataEnd-base {
		return fmt.Errorf("pages at [%d, +%d) outside the data [4, %d)", base, md.TotalCompressedSize, dataEnd)
	}
	end := base + md.TotalCompressedSize
	for pos, page := base, 0; pos < end; page++ {
		next, err := checkPage(r, md.Codec, pos, end, maxValues)
		if err != nil {
			return fmt.Errorf("page %d at byte %d: %w", page, pos, err)
		}
		pos = next
	}
	return nil
}

// checkPage checks the page whose header starts at pos (its chunk ends at
// end) and returns where the next one starts.
func checkPage(r io.ReaderAt, codec format.CompressionCodec, pos, end, maxValues int64) (int64, error) {
	var (
		hdr      []byte
		n        int
		alloc    int64
		err      error
		window   = int64(1 << 10)
		chunkEnd = end - pos
	)
	for {
		window = min(window, chunkEnd)
		hdr = make([]byte, window)
		if _, rerr := r.ReadAt(hdr, pos); rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, rerr
		}
		n, alloc, err = checkThrift(hdr, pageHeaderType, true)
		if !errors.Is(err, errThriftShort) || window >= min(chunkEnd, maxPageHeaderBytes) {
			break
		}
		window *= 4
	}
	if err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	if alloc > maxPageHeaderBytes {
		return 0, fmt.Errorf("header would take %d MiB to decode", alloc>>20)
	}
	var h format.PageHeader
	if err := guard("", "decode page header", func() error {
		return thrift.Unmarshal(new(thrift.CompactProtocol), hdr[:n], &h)
	}); err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	body := pos + int64(n)
	size := int64(h.CompressedPageSize)
	switch {
	case size < 0 || size > end-body:
		return 0, fmt.Errorf("%d bytes, %d left in the column chunk", size, end-body)
	case h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes:
		return 0, fmt.Errorf("%d bytes uncompressed (at most %d)", h.UncompressedPageSize, maxPageBytes)
	}
	var values int32
	levels := int64(0) // uncompressed level bytes before the data (v2)
	compressed := codec != format.Uncompressed
	switch {
	case h.DataPageHeader.Valid:
		values = h.DataPageHeader.V.NumValues
	case h.DictionaryPageHeader.Valid:
		values = h.DictionaryPageHeader.V.NumValues
	case h.DataPageHeaderV2.Valid:
		v := &h.DataPageHeaderV2.V
		values = max(v.NumValues, v.NumRows, v.NumNulls)
		if v.NumValues < 0 || v.NumRows < 0 || v.NumNulls < 0 {
			values = -1
		}
		levels = int64(v.RepetitionLevelsByteLength) + int64(v.DefinitionLevelsByteLength)
		if v.RepetitionLevelsByteLength < 0 || v.DefinitionLevelsByteLength < 0 || levels > size {
			return 0, fmt.Errorf("%d level bytes in a page of %d", levels, size)
		}
		if v.IsCompressed.Valid && !v.IsCompressed.V {
			compressed = false
		}
	}
	if values < 0 || int64(values) > maxValues {
		return 0, fmt.Errorf("%d values (at most %d)", values, maxValues)
	}
	if compressed {
		out, err := decompressedBound(r, codec, body+levels, size-levels)
		if err != nil {
			return 0, fmt.Errorf("%s data: %w", codec, err)
		}
		if out > maxPageBytes {
			return 0, fmt.Errorf("%s data decompresses to up to %d bytes (at most %d)", codec, out, maxPageBytes)
		}
	}
	return body + size, nil
}

// decompressedBound returns an upper bound of what n bytes of codec's
// output at off decompress to, read from the format's headers without
// decompressing.
func decompressedBound(r io.ReaderAt, codec format.CompressionCodec, off, n int64) (int64, error) {
	switch codec {
	case format.Snappy:
		var b [binary.MaxVarintLen64]byte
		k, err := r.ReadAt(b[:min(int64(len(b)), n)], off)
		if k == 0 {
			return 0, fmt.Errorf("empty: %v", err)
		}
		v, m := binary.Uvarint(b[:k])
		if m <= 0 {
			return 0, errors.New("bad length header")
		}
		return int64(min(v, 1<<62)), nil
	case format.Zstd:
		return zstdBound(r, off, n)
	}
	return 0, fmt.Errorf("codec %s", codec)
}

// zstdBound bounds the decompressed size of the zstd frames in [off,
// off+n) from their headers (RFC 8878): a raw or RLE block regenerates its
// stated size, a compressed one at most 128 KiB; a frame's declared
// content size and window are checked too, since the decoder allocates by
// them.
func zstdBound(r io.ReaderAt, off, n int64) (int64, error) {
	end := off + n
	var total int64
	read := func(k int) ([]byte, error) {
		if int64(k) > end-off {
			return nil, errors.New("truncated frame")
		}
		b := make([]byte, k)
		if _, err := r.ReadAt(b, off); err != nil {
			return nil, err
		}
		off += int64(k)
		return b, nil
	}
	for off < end {
		b, err := read(4)
		if err != nil {
			return 0, err
		}
		magic := binary.LittleEndian.Uint32(b)
		if magic&0xFFFFFFF0 == 0x184D2A50 { // skippable frame
			b, err := read(4)
			if err != nil {
				return 0, err
			}
			skip := int64(binary.LittleEndian.Uint32(b))
			if skip > end-off {
				return 0, errors.New("truncated skippable frame")
			}
			off += skip
			continue
		}
		if magic != 0xFD2FB528 {
			return 0, fmt.Errorf("no zstd frame magic (%#x)", magic)
		}
		b, err = read(1)
		if err != nil {
			return 0, err
		}
		fhd := b[0]
		if fhd&0x08 != 0 {
			return 0, errors.New("reserved frame header bit set")
		}
		single := fhd&0x20 != 0
		if !single {
			wd, err := read(1)
			if err != nil {
				return 0, err
			}
			exp := int64(wd[0]>>3) + 10
			if exp > 41 {
				return 0, fmt.Errorf("window of 2^%d bytes", exp)
			}
			window := int64(1)<<exp + (int64(1)<<exp/8)*int64(wd[0]&7)
			if window > maxPageBytes {
				return 0, fmt.Errorf("window of %d bytes", window)
			}
		}
		if _, err := read([4]int{0, 1, 2, 4}[fhd&3]); err != nil { // dictionary id
			return 0, err
		}
		fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
		if fcsLen == 0 && single {
			fcsLen = 1
		}
		if fcsLen > 0 {
			b, err := read(fcsLen)
			if err != nil {
				return 0, err
			}
			var fcs uint64
			for i := fcsLen - 1; i >= 0; i-- {
				fcs = fcs<<8 | uint64(b[i])
			}
			if fcsLen == 2 {
				fcs += 256
			}
			if fcs > maxPageBytes {
				return 0, fmt.Errorf("frame declares %d bytes", fcs)
			}
		}
		for {
			b, err := read(3)
			if err != nil {
				return 0, err
			}
			bh := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
			last, typ, size := bh&1 != 0, (bh>>1)&3, int64(bh>>3)
			switch typ {
			case 0: // raw
				total += size
				off += size
			case 1: // RLE
				total += size
				off++
			case 2: // compressed
				total += 128 << 10
				off += size
			default:
				return 0, errors.New("reserved block type")
			}
			if off > end {
				return 0, errors.New("truncated block")
			}
			if total > maxPageBytes {
				return total, nil
			}
			if last {
				break
			}
		}
		if fhd&0x04 != 0 { // content checksum
			if _, err := read(4); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}
