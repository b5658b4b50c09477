// go-http: seeds/001's "Go Standard Http", with the bytes `sluice serve`
// answers: GET / is the hello world (`sluice serve static --size 12`) and
// GET /v1/pets the petstore list. Standard library only.
//
//	go-http -port 8080 [-host 127.0.0.1]
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"strconv"
)

type pet struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Tag  string `json:"tag"`
}

var (
	hello = []byte("abcdefghijkl")
	pets  = []pet{{1, "catten", "cat"}, {2, "doggy", "dog"}}
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 8080, "port to listen on")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(hello)
	})
	mux.HandleFunc("GET /v1/pets", func(w http.ResponseWriter, _ *http.Request) {
		// json.Marshal, not an Encoder: an Encoder appends a newline sluice does not send.
		body, err := json.Marshal(pets)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})

	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	log.Printf("go-http listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
