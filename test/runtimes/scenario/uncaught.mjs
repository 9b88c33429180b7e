// `node uncaught.mjs <endpoint>`: a call that fails, left uncaught, as in a user's first script. What Node
// prints then (the throwing line, the stack, the causes) is what readable.test.ts measures.
import { Etcd } from "etcd-edge";

await new Etcd({ endpoints: [process.argv[2]] }).get("x");
