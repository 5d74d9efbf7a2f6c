package groupcfg

import (
	"bytes"

	"github.com/magiconair/properties"
)

// setting is one key=value line of a properties file: the key and value as the file's loader
// reads them, and the number of the line that starts it.
type setting struct {
	key, value string
	line       int
}

// fileSettings returns every setting of a properties file in order, repeated keys included,
// which a properties loader keeps only the last of. Each logical line (Java's: a line ending in
// an odd number of backslashes continues on the next; blank lines and lines starting with '#' or
// '!' hold nothing) is read by loader on its own, bytes as in the file, so that keys and values
// are read exactly as loader reads the whole file.
func fileSettings(loader properties.Loader, data []byte) []setting {
	var out []setting
	start, first, continued := 0, 0, false
	for n, line := range naturalLines(data) {
		text := bytes.TrimLeft(data[line.start:line.end], " \t\f")
		if !continued {
			if len(text) == 0 || text[0] == '#' || text[0] == '!' {
				continue
			}
			start, first = line.start, n+1
		}
		trailing := len(text) - len(bytes.TrimRight(text, `\`))
		if continued = trailing%2 == 1; !continued {
			out = append(out, readLogical(loader, data[start:line.next], first)...)
		}
	}
	if continued {
		out = append(out, readLogical(loader, data[start:], first)...)
	}
	return out
}

// readLogical reads one logical line with loader.
func readLogical(loader properties.Loader, logical []byte, line int) []setting {
	p, err := loader.LoadBytes(logical)
	if err != nil {
		return nil // the whole file was read already: this does not happen
	}
	var out []setting
	for _, k := range p.Keys() {
		v, _ := p.Get(k)
		out = append(out, setting{key: k, value: v, line: line})
	}
	return out
}

// naturalLine is one line of a file: its text is data[start:end], and the next line starts at
// next (after the line terminator).
type naturalLine struct{ start, end, next int }

// naturalLines splits data at "\n", "\r\n" and "\r", the line terminators of Java's
// Properties.load.
func naturalLines(data []byte) []naturalLine {
	var lines []naturalLine
	for at := 0; at < len(data); {
		i := bytes.IndexAny(data[at:], "\r\n")
		if i < 0 {
			lines = append(lines, naturalLine{at, len(data), len(data)})
			break
		}
		end, next := at+i, at+i+1
		if data[end] == '\r' && next < len(data) && data[next] == '\n' {
			next++
		}
		lines = append(lines, naturalLine{at, end, next})
		at = next
	}
	return lines
}

// repeated groups the settings of keys set more than once, in the order of their first line.
func repeated(settings []setting) [][]setting {
	byKey := make(map[string][]setting)
	var order []string
	for _, s := range settings {
		if _, ok := byKey[s.key]; !ok {
			order = append(order, s.key)
		}
		byKey[s.key] = append(byKey[s.key], s)
	}
	var out [][]setting
	for _, k := range order {
		if len(byKey[k]) > 1 {
			out = append(out, byKey[k])
		}
	}
	return out
}
