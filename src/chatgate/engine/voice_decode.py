"""Audio to 16 kHz mono PCM with PyAV, bounded in duration (call from a thread).

PyAV's wheels ship FFmpeg with its codecs, so Telegram's OGG/Opus voice notes (and MP3, M4A,
WAV, FLAC...) decode on a fresh machine with no system package. ``av`` is imported here only,
when a voice note arrives: a gateway that never gets one never loads it (about 0.5 s and
~100 MB of shared libraries).
"""

from __future__ import annotations

import io
import wave

from chatgate.domain.media import MediaRefused
from chatgate.domain.voice import SAMPLE_RATE

BYTES_PER_SECOND = SAMPLE_RATE * 2


class NoAudio(MediaRefused):
    """The file holds no audio stream at all (a silent video: nothing to transcribe, no fault)."""


def decode_pcm(data: bytes, max_seconds: float) -> bytes:
    """The audio in ``data`` as 16 kHz mono signed 16-bit PCM. Longer than ``max_seconds``, or
    not decodable, is ``MediaRefused`` with the reason the user reads."""
    import av  # lazily: only a voice note needs FFmpeg

    limit = int(max_seconds * BYTES_PER_SECOND)
    too_long = MediaRefused(f"it is longer than {max_seconds:g} s (media.voice.max_seconds)")
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise NoAudio("it has no audio")
            stream = container.streams.audio[0]
            stated = stream.duration * stream.time_base if stream.duration and stream.time_base else 0
            if float(stated) > max_seconds + 1:
                raise too_long  # the header says so: nothing is decoded
            resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            out = bytearray()
            for frame in container.decode(stream):
                for piece in resampler.resample(frame):
                    out += bytes(piece.planes[0])[: piece.samples * 2]
                if len(out) > limit:
                    raise too_long  # a header can lie: the decoded samples cannot
            for piece in resampler.resample(None):
                out += bytes(piece.planes[0])[: piece.samples * 2]
    except MediaRefused:
        raise
    except (av.FFmpegError, ValueError, EOFError) as exc:
        raise MediaRefused(f"the audio could not be decoded ({type(exc).__name__})") from None
    if len(out) > limit:
        raise too_long
    if not out:
        raise MediaRefused("the audio is empty")
    return bytes(out)


def wav_bytes(pcm: bytes) -> bytes:
    """16 kHz mono PCM as a WAV file (what a transcription endpoint is sent: every server reads it)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm)
    return buffer.getvalue()
