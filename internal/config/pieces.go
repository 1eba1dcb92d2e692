package config

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// A YAML parser holds the whole document as a tree of nodes, about 170
// bytes each: a file of 10 MB with 92 000 descriptors made a tree of 176 MB,
// which, with the garbage of building it, took the process past 400 MB at
// every load. Most large files are long lists of top-level descriptors in
// block style, so such a file is read in pieces instead: the lines of the
// top-level descriptors are cut into groups of about pieceBytes, each group
// is parsed as a document of its own and turned into rules before the next
// one is parsed, and the rest of the file (its domain) as one more. Only one
// group's nodes are alive at a time.
//
// A piece means what it means in the whole file, or fails to parse: a cut
// inside a quoted or flow scalar or collection leaves it unterminated, and
// an alias to an anchor in another piece is unknown to it. Whenever reading
// in pieces fails, for any reason, the whole file is read again the usual
// way, so an error is always the one the whole file gives.

// pieceBytes is about how much of the file one piece holds.
const pieceBytes = 64 << 10

// pieces is a file cut for reading in pieces.
type pieces struct {
	// root is the file with the lines of the top-level descriptors made
	// blank, so that every line keeps its number: the domain, and a
	// descriptors field with no value.
	root []byte
	// line is the number of the "descriptors:" line.
	line int
	// groups hold the top-level descriptors, in order.
	groups []piece
}

// piece is some consecutive top-level descriptors: lines of the file, from
// line first on, that make a YAML list of n items.
type piece struct {
	data  []byte
	first int
	n     int
}

// cutPieces cuts data for reading in pieces, and reports false when it is
// not of the shape that can be: a block mapping whose "descriptors:" line, at
// column 0 with at most a comment after it, is followed by its list in block
// style, each item starting with "- " at one column. Files with a byte order
// mark, tabs in indentation, document markers or directives are read whole.
func cutPieces(data []byte) (pieces, bool) {
	if !utf8.Valid(data) || bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return pieces{}, false
	}
	var (
		p         pieces
		line      = 0  // number of the current line
		state     = 0  // 0: before descriptors, 1: in its list, 2: after it
		column    = -1 // the column of the items' '-'
		listStart int  // offset of the list's first line
		listEnd   int  // offset past the list's last line
		cur       *piece
		curStart  int
	)
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := off + end + 1
		if end < 0 {
			next = len(data)
		}
		text := bytes.TrimSuffix(data[off:next], []byte("\n"))
		text = bytes.TrimSuffix(text, []byte("\r"))
		line++
		indent := 0
		for indent < len(text) && text[indent] == ' ' {
			indent++
		}
		rest := text[indent:]
		blank := len(rest) == 0 || rest[0] == '#'
		if len(rest) > 0 && rest[0] == '\t' {
			return pieces{}, false
		}
		if indent == 0 && (bytes.HasPrefix(rest, []byte("---")) || bytes.HasPrefix(rest, []byte("...")) || bytes.HasPrefix(rest, []byte("%"))) {
			return pieces{}, false
		}
		item := len(rest) > 0 && rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ')
		switch state {
		case 0:
			if indent == 0 && isDescriptorsLine(rest) {
				state, listStart, p.line = 1, next, line
			}
		case 1:
			if blank {
				break
			}
			if column < 0 {
				if !item {
					return pieces{}, false // not a list in block style
				}
				column = indent
			}
			switch {
			case indent == column && item:
				if cur == nil || off-curStart >= pieceBytes {
					if cur != nil {
						cur.data = data[curStart:off]
					}
					p.groups = append(p.groups, piece{first: line})
					cur, curStart = &p.groups[len(p.groups)-1], off
				}
				cur.n++
			case indent > column:
				// A line of the current item.
			case indent == column && column > 0:
				return pieces{}, false
			default:
				state, listEnd = 2, off
			}
		}
		off = next
	}
	if state == 0 || cur == nil {
		return pieces{}, false
	}
	if state == 1 {
		listEnd = len(data)
	}
	cur.data = data[curStart:listEnd]
	// The list's lines, blank.
	p.root = make([]byte, 0, len(data)-(listEnd-listStart)+bytes.Count(data[listStart:listEnd], []byte("\n")))
	p.root = append(p.root, data[:listStart]...)
	for range bytes.Count(data[listStart:listEnd], []byte("\n")) {
		p.root = append(p.root, '\n')
	}
	p.root = append(p.root, data[listEnd:]...)
	return p, true
}

// isDescriptorsLine reports whether text is "descriptors:" with at most
// spaces and a comment after it.
func isDescriptorsLine(text []byte) bool {
	rest, ok := bytes.CutPrefix(text, []byte("descriptors:"))
	if !ok {
		return false
	}
	rest = bytes.TrimLeft(rest, " ")
	return len(rest) == 0 || rest[0] == '#' && len(rest) < len(text)-len("descriptors:")
}

// errWhole makes parse read the file whole: reading it in pieces found what
// only the whole file can say.
var errWhole = errors.New("config: read the file whole")

// parsePieces reads the file cut into pieces as parse reads it whole,
// into a new domain; errWhole or any other error means that it must be
// read whole.
func (p *fileParser) parsePieces(ps pieces) (*domain, error) {
	root, err := readDocument(p.file, ps.root)
	if err != nil {
		return nil, err
	}
	d, fs, err := p.parseRoot(root)
	if err != nil {
		return nil, err
	}
	if p.domains[d.name] != nil {
		return nil, errWhole // a domain of an earlier file: merged
	}
	if f, present := fs["descriptors"]; !present || f.key.Line != ps.line {
		return nil, errWhole // the line cut at is not the field
	}
	if _, ok, err := p.get(fs, "", "descriptors"); err != nil || ok {
		return nil, errWhole // the list was not all cut out
	}
	i := 0
	for _, g := range ps.groups {
		list, err := readDocument(p.file, g.data)
		if err != nil {
			return nil, err
		}
		if list.Kind != yaml.SequenceNode || len(list.Content) != g.n {
			return nil, errWhole
		}
		shiftLines(list, g.first-1)
		for _, item := range list.Content {
			if err := p.descriptor(item, "descriptors["+strconv.Itoa(i)+"]", i, d.top, nil, 1); err != nil {
				return nil, err
			}
			i++
		}
	}
	return d, nil
}

// shiftLines adds by to the line of n and of every node under it.
func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
}
