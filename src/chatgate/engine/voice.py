"""Transcribing a voice note once, at fetch time: decode (``voice_decode``), then a recogniser.

``embedded`` is PocketSphinx, whose wheel ships an English acoustic model and dictionary: it
needs no download at run time and sends the audio nowhere. ``openai`` posts the decoded audio
(as a 16 kHz WAV) to an OpenAI-compatible ``/v1/audio/transcriptions`` endpoint. Both run off
the event loop (decoding and PocketSphinx in a thread of their own, the endpoint over
aiohttp), within ``media.voice.timeout_seconds``. A failure is the voice note's only: its
record keeps the reason, and the model and the user read it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from chatgate.domain.media import MediaRefused
from chatgate.domain.voice import SAMPLE_RATE, VoiceSettings
from chatgate.engine.voice_decode import decode_pcm, wav_bytes

log = logging.getLogger(__name__)
T = TypeVar("T")

_decoder: Any = None
_decoder_lock = threading.Lock()
"""PocketSphinx's decoder takes seconds to load its model: one per process, used by one thread
at a time (it is not thread-safe)."""


def recognise(pcm: bytes) -> str:
    """PocketSphinx's best hypothesis for 16 kHz mono PCM (call from a thread)."""
    global _decoder
    with _decoder_lock:
        if _decoder is None:
            import pocketsphinx  # lazily: only a voice note needs the model (~30 MB on disk)

            _decoder = pocketsphinx.Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")
        decoder = _decoder
        decoder.start_utt()
        try:
            decoder.process_raw(pcm, full_utt=True)
        finally:
            decoder.end_utt()
        hyp = decoder.hyp()
        return str(hyp.hypstr) if hyp is not None else ""


class Transcriber:
    """Decodes and transcribes audio with the configured recogniser (``media.voice``)."""

    def __init__(self, settings: VoiceSettings) -> None:
        self.settings = settings
        self._pool: ThreadPoolExecutor | None = None
        """One thread of its own, made when the first voice note arrives: voice notes are decoded
        and recognised one at a time (CPU-bound work), never holding the loop's default
        executor, which the other file checks share."""

    def close(self) -> None:
        """Shutdown: drop queued work; a recognition under way finishes on its own (bounded by
        ``max_seconds`` of audio) and its result is dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def _run(self, work: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="voice")
        return await asyncio.get_running_loop().run_in_executor(self._pool, work, *args)

    @property
    def enabled(self) -> bool:
        return self.settings.transcription != "off"

    async def transcribe(self, data: bytes) -> str:
        """The words of the audio in ``data``; ``MediaRefused`` says why there are none."""
        try:
            async with asyncio.timeout(self.settings.timeout_seconds):
                pcm = await self._run(decode_pcm, data, self.settings.max_seconds)
                if self.settings.transcription == "openai":
                    return await self._openai(pcm)
                return await self._run(recognise, pcm)
        except TimeoutError:
            raise MediaRefused(f"transcribing took longer than {self.settings.timeout_seconds:g} s") from None

    async def _openai(self, pcm: bytes) -> str:
        try:
            import aiohttp  # the openai extra, as the client below: only a transcription needs it

            from chatgate.agents.model_http import ModelCallError, ModelEndpoint, ModelStatusError  # ditto
        except ImportError:
            raise MediaRefused("the openai transcription needs chatgate[openai] installed") from None
        key = os.environ.get(self.settings.api_key_env, "")
        if not key:
            raise MediaRefused(f"{self.settings.api_key_env} is not set (media.voice.openai.api_key_env)")
        wav = await self._run(wav_bytes, pcm)

        def form() -> aiohttp.FormData:
            fields = aiohttp.FormData()
            fields.add_field("model", self.settings.model)
            if self.settings.language:
                fields.add_field("language", self.settings.language)
            fields.add_field("file", wav, filename="voice.wav", content_type="audio/wav")
            return fields

        # Made off the loop: it looks up the environment's proxy, and .netrc on disk with it.
        endpoint = await asyncio.to_thread(
            ModelEndpoint, self.settings.base_url, key, timeout_s=self.settings.timeout_seconds, max_retries=1
        )
        try:
            result = await endpoint.post_form("/audio/transcriptions", form)
        except ModelStatusError as exc:
            raise MediaRefused(f"the transcription service answered HTTP {exc.status}") from None
        except ModelCallError as exc:
            raise MediaRefused(f"the transcription service failed ({type(exc).__name__})") from None
        finally:
            await endpoint.aclose()
        text = result.get("text") if isinstance(result, dict) else None
        if not isinstance(text, str):
            raise MediaRefused("the transcription service answered without a text")
        return text
