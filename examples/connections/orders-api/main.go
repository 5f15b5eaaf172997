// Command orders-api is a small JSON API the connections example puts
// behind toolplane: orders to read and refunds to make, behind a bearer
// token, honouring Idempotency-Key on refunds. With -sqlite it also
// writes its orders to a SQLite file, the database the example's SQL tool
// reads.
//
//	ORDERS_API_TOKEN=secret go run ./examples/connections/orders-api -addr 127.0.0.1:9090 -sqlite toolplane-data/sql/shop.db
package main

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite"
)

type order struct {
	ID          string `json:"id"`
	Customer    string `json:"customer"`
	Status      string `json:"status"`
	TotalCents  int64  `json:"total_cents"`
	RefundCents int64  `json:"refunded_cents"`
}

type refund struct {
	ID          string `json:"refund_id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// api holds the orders in memory; refunds are kept by idempotency key, so
// a retried request with the same key is one refund.
type api struct {
	token   string
	mu      sync.Mutex
	orders  map[string]*order
	refunds map[string]refund
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "where to listen")
	db := flag.String("sqlite", "", "also write the orders to this SQLite file (created, or replaced)")
	flag.Parse()
	a := &api{token: os.Getenv("ORDERS_API_TOKEN"), orders: map[string]*order{}, refunds: map[string]refund{}}
	if a.token == "" {
		log.Fatal("orders-api: set ORDERS_API_TOKEN to the token callers must present")
	}
	for _, o := range []order{
		{ID: "ord_9f8a7c2e1b3d", Customer: "Ada Lovelace", Status: "delivered", TotalCents: 4999},
		{ID: "ord_1a2b3c4d5e6f", Customer: "Grace Hopper", Status: "shipped", TotalCents: 12900},
		{ID: "ord_7e6d5c4b3a2f", Customer: "Alan Turing", Status: "delivered", TotalCents: 2500},
	} {
		a.orders[o.ID] = &o
	}
	if *db != "" {
		if err := seed(*db, a.orders); err != nil {
			log.Fatalf("orders-api: %v", err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", a.auth(a.getOrder))
	mux.HandleFunc("POST /orders/{id}/refunds", a.auth(a.refund))
	srv := &http.Server{Addr: *addr, Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); srv.Close() }()
	fmt.Printf("orders-api on http://%s\n", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

func (a *api) auth(next http.HandlerFunc) http.HandlerFunc {
	want := []byte("Bearer " + a.token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			reply(w, http.StatusUnauthorized, map[string]string{"message": "a valid bearer token is required"})
			return
		}
		next(w, r)
	}
}

func (a *api) getOrder(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.orders[r.PathValue("id")]
	if !ok {
		reply(w, http.StatusNotFound, map[string]string{"message": "no order " + r.PathValue("id")})
		return
	}
	reply(w, http.StatusOK, o)
}

func (a *api) refund(w http.ResponseWriter, r *http.Request) {
	var body struct {
		AmountCents int64  `json:"amount_cents"`
		Reason      string `json:"reason"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.AmountCents <= 0 {
		reply(w, http.StatusBadRequest, map[string]string{"message": "amount_cents must be a positive whole number"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	a.mu.Lock()
	defer a.mu.Unlock()
	if done, ok := a.refunds[key]; ok && key != "" {
		reply(w, http.StatusOK, done)
		return
	}
	o, ok := a.orders[r.PathValue("id")]
	switch {
	case !ok:
		reply(w, http.StatusNotFound, map[string]string{"message": "no order " + r.PathValue("id")})
		return
	case o.RefundCents+body.AmountCents > o.TotalCents:
		reply(w, http.StatusConflict, map[string]string{"message": fmt.Sprintf("only %d cents are left to refund", o.TotalCents-o.RefundCents)})
		return
	}
	o.RefundCents += body.AmountCents
	rf := refund{ID: fmt.Sprintf("re_%s_%d", o.ID[4:], len(a.refunds)+1), OrderID: o.ID, AmountCents: body.AmountCents}
	if key != "" {
		a.refunds[key] = rf
	}
	reply(w, http.StatusCreated, rf)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// seed writes the orders to a fresh SQLite file.
func seed(path string, orders map[string]*order) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	os.Remove(path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, status TEXT NOT NULL, total_cents INTEGER NOT NULL)`); err != nil {
		return err
	}
	for _, o := range orders {
		if _, err := db.Exec(`INSERT INTO orders VALUES (?, ?, ?, ?)`, o.ID, o.Customer, o.Status, o.TotalCents); err != nil {
			return err
		}
	}
	return nil
}
