package ratings

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A layout is one of the file layouts GroupLens publishes MovieLens sets in.
type layout struct {
	ratings, movies string
	readRatings     func(io.Reader) ([]Rating, error)
	readMovies      func(dir, movies string) (Genres, error) // dir's movies' file (and any it needs)
}

// layouts are tried in this order: the first whose ratings file dir holds
// is read.
var layouts = []layout{
	// ml-latest, ml-latest-small, ml-20m, ml-25m, ml-32m
	{"ratings.csv", "movies.csv", ReadRatings, movieFile(ReadMovies)},
	// ml-1m, ml-10m: UserID::MovieID::Rating::Timestamp, MovieID::Title::Genres
	{"ratings.dat", "movies.dat", ratingLines(func(l string) []string { return strings.Split(l, "::") }), movieFile(ReadMoviesDat)},
	// ml-100k: user item rating timestamp (tabs); the items with a flag per
	// genre of u.genre
	{"u.data", "u.item", ratingLines(strings.Fields), readMovies100K},
}

// movieFile returns a reader of dir's movies' file that reads it with read.
func movieFile(read func(io.Reader) (Genres, error)) func(dir, movies string) (Genres, error) {
	return func(dir, movies string) (Genres, error) { return readFile(filepath.Join(dir, movies), read) }
}

// ReadMovieLens reads the ratings (in file order) and the movies' genres
// of a MovieLens set in dir, in any of GroupLens' layouts: ratings.csv and
// movies.csv (ml-latest, ml-20m and later), ratings.dat and movies.dat
// (ml-1m, ml-10m), or u.data, u.item and u.genre (ml-100k). Without the movies'
// file (a ratings set of another source in one of these formats) the
// genres are nil: the items are known by their ids alone. dir is always
// given as a flag: the data is never in the repository.
func ReadMovieLens(dir string) ([]Rating, Genres, error) {
	l, err := findLayout(dir)
	if err != nil {
		return nil, nil, err
	}
	rs, err := readFile(filepath.Join(dir, l.ratings), l.readRatings)
	if err != nil {
		return nil, nil, err
	}
	g, err := l.readMovies(dir, l.movies)
	if errors.Is(err, fs.ErrNotExist) {
		return rs, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return rs, g, nil
}

// ReadMovieLensRatings reads only the ratings of a MovieLens set in dir
// (ReadMovieLens), in file order.
func ReadMovieLensRatings(dir string) ([]Rating, error) {
	l, err := findLayout(dir)
	if err != nil {
		return nil, err
	}
	return readFile(filepath.Join(dir, l.ratings), l.readRatings)
}

func findLayout(dir string) (layout, error) {
	var names []string
	for _, l := range layouts {
		_, err := os.Stat(filepath.Join(dir, l.ratings))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return layout{}, err
		}
		names = append(names, l.ratings+" and "+l.movies)
	}
	return layout{}, fmt.Errorf("%s: no MovieLens set: want %s", dir, strings.Join(names, ", or "))
}

func readFile[T any](name string, read func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(name)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	v, err := read(f)
	if err != nil {
		return v, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// eachLine calls fn with each line of r that is not blank, without its
// line ending; it stops at fn's first error, wrapped with
// the line's number. The lines are bytes, whatever their encoding (ml-1m's
// and ml-100k's titles are Latin-1).
func eachLine(r io.Reader, fn func(line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// parseRating parses the four fields of a rating: user, item, rating and
// Unix time.
func parseRating(f []string) (Rating, error) {
	if len(f) != 4 {
		return Rating{}, fmt.Errorf("%d fields, want 4 (user, item, rating, time)", len(f))
	}
	var x Rating
	var e1, e2, e3, e4 error
	x.User, e1 = strconv.Atoi(f[0])
	x.Item, e2 = strconv.Atoi(f[1])
	x.Value, e3 = strconv.ParseFloat(f[2], 64)
	x.Time, e4 = strconv.ParseInt(f[3], 10, 64)
	return x, errors.Join(e1, e2, e3, e4)
}

// ratingLines returns a reader of ratings one per line, no header, each
// line's four fields (user, item, rating, Unix time) as split gives them:
// ml-1m's and ml-10m's ratings.dat ("::"), ml-100k's u.data (tabs).
func ratingLines(split func(string) []string) func(io.Reader) ([]Rating, error) {
	return func(r io.Reader) ([]Rating, error) {
		var out []Rating
		err := eachLine(r, func(line string) error {
			x, err := parseRating(split(line))
			out = append(out, x)
			return err
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// ReadMoviesDat reads ml-1m's and ml-10m's movies.dat: per line
// MovieID::Title::Genres, the genres joined by '|' (NoGenres is none), no
// header.
func ReadMoviesDat(r io.Reader) (Genres, error) {
	out := Genres{}
	err := eachLine(r, func(line string) error {
		i, j := strings.Index(line, "::"), strings.LastIndex(line, "::")
		if i < 0 || i == j {
			return errors.New("want MovieID::Title::Genres")
		}
		id, err := strconv.Atoi(line[:i])
		if err != nil {
			return err
		}
		out[id] = splitGenres(line[j+2:])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readMovies100K reads ml-100k's genre names from dir/u.genre and its items
// from dir/items (u.item).
func readMovies100K(dir, items string) (Genres, error) {
	if _, err := os.Stat(filepath.Join(dir, items)); err != nil {
		return nil, err // without u.item, the items are known by their ids
	}
	names, err := readFile(filepath.Join(dir, "u.genre"), ReadGenres100K)
	if err != nil {
		return nil, fmt.Errorf("%s needs its genres' names: %v", items, err) // not ErrNotExist: the items are there
	}
	return readFile(filepath.Join(dir, items), func(r io.Reader) (Genres, error) { return ReadMovies100K(r, names) })
}

// ReadGenres100K reads ml-100k's u.genre: per line a genre's name and its
// flag's position in u.item, separated by '|'. Every position from 0 up
// must be named once.
func ReadGenres100K(r io.Reader) ([]string, error) {
	var names []string
	err := eachLine(r, func(line string) error {
		name, pos, ok := strings.Cut(line, "|")
		if !ok {
			return errors.New("want name|position")
		}
		k, err := strconv.Atoi(pos)
		if err != nil {
			return err
		}
		if k != len(names) {
			return fmt.Errorf("genre %q at position %d, want %d", name, k, len(names))
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no genres")
	}
	return names, nil
}

// ReadMovies100K reads ml-100k's u.item: per line, separated by '|', the
// item id, title, release date, video release date, IMDb URL and one flag
// (0 or 1) per genre of names (u.genre's); no header. A genre named
// "unknown" is none.
func ReadMovies100K(r io.Reader, names []string) (Genres, error) {
	out := Genres{}
	err := eachLine(r, func(line string) error {
		f := strings.Split(line, "|")
		if want := 5 + len(names); len(f) != want {
			return fmt.Errorf("%d fields, want %d (id, title, release date, video release date, URL, %d genre flags)",
				len(f), want, len(names))
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return err
		}
		var g []string
		for k, flag := range f[5:] {
			switch flag {
			case "0":
			case "1":
				if names[k] != "unknown" {
					g = append(g, names[k])
				}
			default:
				return fmt.Errorf("genre flag %d (%s) is %q, want 0 or 1", k, names[k], flag)
			}
		}
		out[id] = g
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// splitGenres splits genres joined by '|'; NoGenres and "" are none.
func splitGenres(g string) []string {
	if g == "" || g == NoGenres {
		return nil
	}
	return strings.Split(g, "|")
}
