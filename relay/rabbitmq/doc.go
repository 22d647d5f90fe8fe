// Package rabbitmq is a placeholder until the relay lands.
package rabbitmq
