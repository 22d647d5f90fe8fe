module github.com/outbox-go/outbox/relay/rabbitmq

go 1.25.0

require (
	github.com/outbox-go/outbox v0.0.0-00010101000000-000000000000
	github.com/rabbitmq/amqp091-go v1.16.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/jmoiron/sqlx v1.4.0 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/oklog/ulid/v2 v2.1.2 // indirect
)

replace github.com/outbox-go/outbox => ../..
