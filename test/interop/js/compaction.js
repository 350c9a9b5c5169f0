// kafkajs reads a compacted topic from the beginning, for test/interop (compaction_test.go
// runs it):
//
//   node compaction.js <broker,broker,...> <topic> <last offset>
//
// It consumes partition 0 with a consumer group from the earliest offset until it has read
// the record at <last offset>, across whatever gaps the cleaner left, and prints one JSON line
// per record: {offset, key, value} with key and value base64 (null for a null one). Any error
// is printed to stderr and exits 1.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [brokers, topic, lastArg] = process.argv.slice(2);
  if (!brokers || !topic || !lastArg) {
    throw new Error('usage: node compaction.js <brokers> <topic> <last offset>');
  }
  const last = BigInt(lastArg);
  const kafka = new Kafka({
    clientId: 'interop-kafkajs-compaction',
    brokers: brokers.split(','),
    logLevel: logLevel.WARN,
    retry: { initialRetryTime: 100, retries: 10 },
  });
  const consumer = kafka.consumer({ groupId: 'interop-kafkajs-compaction', maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const b64 = (buf) => (buf === null ? null : buf.toString('base64'));
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        process.stdout.write(JSON.stringify({ offset: message.offset, key: b64(message.key), value: b64(message.value) }) + '\n');
        if (BigInt(message.offset) >= last) {
          resolve();
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exit(1);
  },
);
