"""Scrape-side collection: fetching and parsing metrics from inference and GPU exporters."""
