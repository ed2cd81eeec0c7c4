"""make demo-python: a few ids from Python with their decoded fields."""

from clockflake import Generator, decode, layouts

gen = Generator(worker_id=7)
print("python: Generator(worker_id=7), layout clockseq")
for id in [gen.next_id() for _ in range(3)] + gen.next_ids(2):
    p = decode(id)
    print(f"  {id:>20}  {p.datetime.isoformat(timespec='milliseconds')}  clock_seq={p.clock_seq} worker={p.worker_id} seq={p.sequence}")
twitter = Generator(worker_id=513, layout="twitter")
id = twitter.next_id()
print(f"python: twitter layout {id} -> {decode(id, 'twitter')}")
print(f"python: presets {', '.join(layouts)}")
