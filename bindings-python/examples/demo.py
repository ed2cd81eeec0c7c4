"""make demo-python: a few ids from Python with their decoded fields."""

import tempfile

from clockflake import Generator, PublicIds, decode, layouts

gen = Generator(worker_id=7)
print("python: Generator(worker_id=7), layout clockseq")
for id in [gen.next_id() for _ in range(3)] + gen.next_ids(2):
    p = decode(id)
    print(
        f"  {id:>20}  {p.datetime.isoformat(timespec='milliseconds')}  clock_seq={p.clock_seq} worker={p.worker_id} seq={p.sequence}"
    )
twitter = Generator(worker_id=513, layout="twitter")
id = twitter.next_id()
print(f"python: twitter layout {id} -> {decode(id, 'twitter')}")
print(f"python: presets {', '.join(layouts)}")
with tempfile.TemporaryDirectory() as directory:
    uri = f"file://{directory}?app=orders"
    with Generator.open(uri) as first, Generator.open(uri) as second:
        print(
            f"python: Generator.open({uri!r}): worker ids {first.worker_id} and {second.worker_id}"
        )
        print(f"  {first.next_id()}, {second.next_id()}")
codec = PublicIds(1, b"demo key 16bytes")
text = codec.encode_text(id)
print(f"python: PublicIds: {id} -> {codec.encode(id)} / {text!r} -> {codec.decode_text(text)}")
