module github.com/outbox-go/outbox/relay/rabbitmq

go 1.25.0

require github.com/outbox-go/outbox v0.0.0-00010101000000-000000000000

replace github.com/outbox-go/outbox => ../..
