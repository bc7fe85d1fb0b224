"""Real files for the media tests, made in the tests: a PNG with Pillow, a PDF with pypdf."""

from __future__ import annotations

import io
from fractions import Fraction
from typing import Any


def png(width: int = 32, height: int = 16, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def pdf(text: str) -> bytes:
    """A one-page PDF whose extracted text is ``text`` (a Helvetica text object, written by pypdf)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=300, height=200)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 12 Tf 20 100 Td ({escaped}) Tj ET".encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(content)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def wav_tone(seconds: float = 0.2, rate: int = 8000) -> bytes:
    """A short 440 Hz tone as 16-bit mono WAV (standard library only)."""
    import math
    import struct
    import wave

    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        samples = (int(8000 * math.sin(2 * math.pi * 440 * n / rate)) for n in range(int(seconds * rate)))
        w.writeframes(b"".join(struct.pack("<h", v) for v in samples))
    return out.getvalue()


def png_bomb(width: int = 20_000, height: int = 20_000) -> bytes:
    """A small PNG whose header claims ``width`` x ``height`` pixels (1-bit, compressed)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (width, height), 0).save(out, format="PNG", optimize=True)
    return out.getvalue()


def spoken_ogg(phrase: str, voice: str = "en-us+f2", speed: int = 150) -> bytes:
    """``phrase`` spoken by espeak-ng (Debian's ``espeak-ng``), encoded to OGG/Opus with PyAV:
    what Telegram sends as a voice note (mono Opus at 48 kHz in an Ogg container)."""
    import av

    out = io.BytesIO()
    with (
        av.open(io.BytesIO(_spoken_wav(phrase, voice, speed))) as source,
        av.open(out, "w", format="ogg") as sink,
    ):
        _mux_sound(source, sink, sink.add_stream("libopus", rate=48000, layout="mono"), "s16")
    return out.getvalue()


def _spoken_wav(phrase: str, voice: str, speed: int) -> bytes:
    import subprocess

    return subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", phrase], check=True, capture_output=True
    ).stdout


def _mux_sound(source: Any, sink: Any, stream: Any, sample_format: str) -> None:
    """``source``'s first audio stream resampled to mono 48 kHz ``sample_format``, encoded into
    ``stream`` of ``sink``, the resampler and the encoder flushed at the end."""
    import av

    resampler = av.AudioResampler(format=sample_format, layout="mono", rate=48000)

    def pieces() -> Any:
        for frame in source.decode(audio=0):
            yield from resampler.resample(frame)
        yield from resampler.resample(None)
        yield None  # the encoder's flush

    for piece in pieces():
        for packet in stream.encode(piece):
            sink.mux(packet)


def silent_mp4() -> bytes:
    """A small blank MP4 video with no sound track at all (a screen recording, say)."""
    import av

    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as sink:
        _blank_frames(sink, _video(sink))
    return out.getvalue()


def _video(sink: Any) -> Any:
    """A 64x64 MPEG-4 Part 2 video stream (an encoder PyAV's FFmpeg ships); added before anything
    is muxed, as a container wants all its streams before its header."""
    video = sink.add_stream("mpeg4", rate=10)
    video.width, video.height, video.pix_fmt = 64, 64, "yuv420p"
    return video


def _blank_frames(sink: Any, video: Any) -> None:
    """Two seconds of a blank picture."""
    import av

    for n in range(20):
        picture = av.VideoFrame(64, 64, "yuv420p")
        for plane in picture.planes:
            plane.update(bytes(plane.buffer_size))
        picture.pts, picture.time_base = n, Fraction(1, 10)
        for packet in video.encode(picture):
            sink.mux(packet)
    for packet in video.encode(None):
        sink.mux(packet)


def spoken_mp4(phrase: str, voice: str = "en-us+f2", speed: int = 150) -> bytes:
    """``phrase`` spoken by espeak-ng as the sound track (AAC) of a small blank MP4 video (MPEG-4
    Part 2), made with PyAV: what Telegram sends as a video note."""
    import av

    out = io.BytesIO()
    with (
        av.open(io.BytesIO(_spoken_wav(phrase, voice, speed))) as source,
        av.open(out, "w", format="mp4") as sink,
    ):
        video = _video(sink)
        _mux_sound(source, sink, sink.add_stream("aac", rate=48000, layout="mono"), "fltp")
        _blank_frames(sink, video)
    return out.getvalue()
