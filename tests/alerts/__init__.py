"""Tests of the rules engine and notification."""
