// A go-sql-driver/mysql client in the middle of a transaction while the primary goes away
// (tests/python/test_transaction_replay.py drives it): it begins a transaction, inserts rows
// 1-3 into `r` and prints "ready"; after a line on stdin it inserts row 4, reads the count
// and commits, printing "ok <count>" or the first error.
package main

import (
	"bufio"
	"database/sql"
	"fmt"
	"os"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run(dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	for id := 1; id <= 3; id++ {
		if _, err := tx.Exec("INSERT INTO r VALUES (?)", id); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	if _, err := tx.Exec("INSERT INTO r VALUES (?)", 4); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM r").Scan(&n); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Println("ok", n)
	return nil
}
