"""Voice notes (issue 29): what decoding and the embedded recogniser cost.

A phrase spoken by espeak-ng (repeated to about ``--seconds`` of speech) is encoded to
OGG/Opus with PyAV, as Telegram sends a voice note, then goes through the gateway's own
steps: ``engine.voice_decode.decode_pcm`` (PyAV to 16 kHz mono PCM) and
``engine.voice.recognise`` (PocketSphinx). CPU time (``time.process_time``: other load on the
machine does not count) and wall time, medians over ``--runs``; the first recognition also
loads the model (``first_recognise_*``). ``rss_growth_mb`` is this process's RSS after the
first recognition above its level before importing ``av``. ``words_right`` counts the
recognised words that match the spoken ones, in place.

Prints one JSON object. ``--quick`` uses a short note and one run (a smoke run, not a
measurement). Needs ``espeak-ng`` on the PATH.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

PHRASE = "one two three four five six seven eight nine ten"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="about this much speech")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.runs = 4.0, 1
    process = psutil.Process()
    rss_before = process.memory_info().rss
    started = time.perf_counter()
    import av  # noqa: F401  (what the gateway pays at its first voice note)

    import_av_s = time.perf_counter() - started
    from chatgate.engine.voice import recognise
    from chatgate.engine.voice_decode import decode_pcm
    from support.media_files import spoken_ogg

    repeats = max(1, round(args.seconds / 3.8))  # espeak-ng says the phrase in about 3.8 s
    spoken = " ".join([PHRASE] * repeats)
    ogg = spoken_ogg(spoken)
    cpu, wall = time.process_time(), time.perf_counter()
    pcm = decode_pcm(ogg, 3600)
    decode_cpu, decode_wall = time.process_time() - cpu, time.perf_counter() - wall
    cpu, wall = time.process_time(), time.perf_counter()
    heard = recognise(pcm)
    first_cpu, first_wall = time.process_time() - cpu, time.perf_counter() - wall
    rss_growth = (process.memory_info().rss - rss_before) / 1e6
    cpus, walls = [], []
    for _ in range(args.runs):
        cpu, wall = time.process_time(), time.perf_counter()
        recognise(pcm)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    seconds = len(pcm) / 32_000
    words = spoken.split()
    right = sum(a == b for a, b in zip(heard.split(), words, strict=False))
    recognise_cpu = statistics.median(cpus)
    result = {
        "note_seconds": round(seconds, 2),
        "ogg_bytes": len(ogg),
        "import_av_s": round(import_av_s, 3),
        "decode_cpu_s": round(decode_cpu, 3),
        "decode_wall_s": round(decode_wall, 3),
        "first_recognise_cpu_s": round(first_cpu, 2),
        "first_recognise_wall_s": round(first_wall, 2),
        "recognise_cpu_s": round(recognise_cpu, 2),
        "recognise_wall_s": round(statistics.median(walls), 2),
        "cpu_per_audio_second": round(recognise_cpu / seconds, 3),
        "rss_growth_mb": round(rss_growth, 1),
        "words_right": right,
        "words": len(words),
        "runs": args.runs,
        "load_average": [round(x, 2) for x in psutil.getloadavg()],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
