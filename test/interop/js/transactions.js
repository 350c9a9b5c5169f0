// kafkajs transactions against paddock, for test/interop (transactions_test.go runs it):
//
//   node transactions.js <broker,broker,...> <topic> <partitions> <group>
//
// The admin client creates the topic; a transactional producer (idempotent, acks=all)
// commits 30 records "kafkajs-commit-a-<i>", aborts 30 "kafkajs-abort-<i>", and commits 30
// "kafkajs-commit-b-<i>", record i to partition i % partitions. A consumer in group <group>
// (kafkajs reads committed records only by default) then reads the topic from the beginning
// until it has the 60 committed records and for 2 s more, so a record that should not be
// there has time to show. It prints {consumed: [value, ...]} and exits 0; any error is
// printed to stderr and exits 1.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [brokers, topic, partitionsArg, groupId] = process.argv.slice(2);
  const partitions = Number(partitionsArg);
  if (!brokers || !topic || !(partitions > 0) || !groupId) {
    throw new Error('usage: node transactions.js <brokers> <topic> <partitions> <group>');
  }
  const kafka = new Kafka({
    clientId: 'interop-kafkajs-txn',
    brokers: brokers.split(','),
    logLevel: logLevel.WARN,
    retry: { initialRetryTime: 100, retries: 10 },
  });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true, timeout: 20000 });
  await admin.disconnect();

  const producer = kafka.producer({ transactionalId: 'interop-kafkajs-txn', idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (const [prefix, commit] of [['kafkajs-commit-a', true], ['kafkajs-abort', false], ['kafkajs-commit-b', true]]) {
    const txn = await producer.transaction();
    const messages = [];
    for (let i = 0; i < 30; i++) {
      messages.push({ value: `${prefix}-${i}`, partition: i % partitions });
    }
    await txn.send({ topic, acks: -1, messages });
    if (commit) {
      await txn.commit();
    } else {
      await txn.abort();
    }
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId, heartbeatInterval: 500, sessionTimeout: 10000, rebalanceTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error));
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString());
        if (consumed.length === 60) {
          setTimeout(resolve, 2000);
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ consumed }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`transactions.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
